/**
 * Whole SSE events in a byte stream, and what they tell a rejoin (protocol/README.md §16). Browser-safe.
 *
 * HTML Standard, "Interpreting an event stream": a line ends at CRLF, LF or CR, whichever the server
 * writes (and it may mix them); a blank line dispatches the block before it. `push` hands back the
 * bytes up to the last blank line exactly as they came, line ends included, because the client parses
 * them itself: @ag-ui/client 1.0.0 splits its text on "\n\n" alone, so whatever a server wrote must
 * reach it unchanged for it to fare as it would without resume.
 */

const LF = 0x0a;
const CR = 0x0d;

/** The run's last event, by its type (AG-UI: RUN_FINISHED or RUN_ERROR ends a run). */
const MAY_END = /"type"\s*:\s*"RUN_(FINISHED|ERROR)"/;
function endsRun(data: string): boolean {
  // The cheap test first: only the rare candidate is parsed, so a nested {"type":"RUN_ERROR"} in a payload does not count.
  if (!MAY_END.test(data)) return false;
  try {
    const type = (JSON.parse(data) as { type?: unknown } | null)?.type;
    return type === "RUN_FINISHED" || type === "RUN_ERROR";
  } catch {
    return false;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

export class EventBlocks {
  /** The last event ID: what a rejoin sends as Last-Event-ID (undefined: none to send). */
  lastId: string | undefined;
  /** Whether the last event dispatched ended the run. */
  ended = false;

  /** Bytes not handed on yet: the start of a block whose blank line has not come. */
  private held: Uint8Array = new Uint8Array(0);
  /** How much of `held` has been scanned, and where its current line starts. */
  private scanned = 0;
  private lineStart = 0;
  /** The byte before `scanned` was a CR that ended a line (and whether that line was blank): an LF now belongs to it (CRLF). */
  private afterCR = false;
  private afterBlankCR = false;
  /** The current block's id field (null: it has none, so it leaves the last id as it is) and data. */
  private id: string | undefined | null = null;
  private data: string | undefined;
  private readonly decoder = new TextDecoder();

  /**
   * Takes the next bytes of the stream; answers with the whole blocks now held, verbatim (empty when
   * none ended), and how many of them were events: blocks with data, the ones a client is given.
   * A block with an id and no data (an answer's opening block) dispatches no event, but its id counts
   * all the same: every dispatch sets the last event ID.
   */
  push(chunk: Uint8Array): { whole: Uint8Array; events: number } {
    const buf = (this.held = concat(this.held, chunk));
    let boundary = 0;
    let events = 0;
    for (let i = this.scanned; i < buf.length; i++) {
      const b = buf[i];
      if (b === LF && this.afterCR) {
        // The LF of a CRLF whose CR already ended the line: it goes with that line (and block).
        this.afterCR = false;
        this.lineStart = i + 1;
        if (this.afterBlankCR) boundary = i + 1;
        continue;
      }
      this.afterCR = false;
      if (b !== LF && b !== CR) continue;
      const blank = i === this.lineStart;
      if (blank) {
        if (this.dispatch()) events++;
        boundary = i + 1;
      } else this.field(buf.subarray(this.lineStart, i));
      this.afterCR = b === CR;
      this.afterBlankCR = blank;
      this.lineStart = i + 1;
    }
    this.scanned = buf.length;
    if (boundary === 0) return { whole: new Uint8Array(0), events };
    this.held = buf.slice(boundary);
    this.scanned -= boundary;
    this.lineStart -= boundary;
    return { whole: buf.subarray(0, boundary), events };
  }

  /** Forgets the block in progress: the connection it came on is gone, and a rejoin sends it again whole. */
  drop(): void {
    this.held = new Uint8Array(0);
    this.scanned = this.lineStart = 0;
    this.afterCR = this.afterBlankCR = false;
    this.id = null;
    this.data = undefined;
  }

  /** What is held at a clean end (a last block with no blank line after it): handed on as the client would have had it. */
  rest(): Uint8Array {
    return this.held;
  }

  /** One field line (a comment, starting with a colon, is nothing). */
  private field(line: Uint8Array): void {
    const text = this.decoder.decode(line);
    const colon = text.indexOf(":");
    if (colon === 0) return;
    const name = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? "" : text.slice(text[colon + 1] === " " ? colon + 2 : colon + 1);
    if (name === "data") this.data = this.data === undefined ? value : `${this.data}\n${value}`;
    // An id holding NULL is ignored; an empty one means none (nothing to send).
    else if (name === "id" && !value.includes("\0")) this.id = value === "" ? undefined : value;
  }

  /** A blank line: the block's id becomes the last id; answers whether it was an event (had data). */
  private dispatch(): boolean {
    if (this.id !== null) this.lastId = this.id;
    this.id = null;
    const data = this.data;
    this.data = undefined;
    if (data === undefined) return false;
    this.ended = endsRun(data);
    return true;
  }
}
