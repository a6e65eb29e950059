/**
 * An incremental reader of AG-UI event streams, in either framing:
 * - Server-Sent Events, as the HTML Standard's "Interpreting an event stream"
 *   (§9.2.6) reads them: lines end with CRLF, LF or CR; a blank line
 *   dispatches the event; a line starting with ":" is a comment; "field:
 *   value" loses one space after the colon; a line without a colon is a field
 *   with an empty value; `data` lines join with "\n"; a block without data
 *   dispatches nothing. `event`, `id` and `retry` are read past (they pass
 *   through untouched). A BOM at the start is skipped.
 * - NDJSON: one event object per line, "\n" or "\r\n".
 * The framing is taken from the first non-blank line: SSE when it is a comment
 * or an SSE field (`data`, `event`, `id`, `retry`), NDJSON otherwise.
 *
 * Every byte of the input comes out again in some item's `raw`, in order, so
 * a caller that writes `raw` back reproduces the input exactly. Bytes that
 * are not UTF-8 are read as U+FFFD, as @ag-ui/client's decoder reads them.
 */

export type Framing = "sse" | "ndjson";

export interface StreamItem {
  /** The item's text exactly as read. */
  raw: string;
  /** The event's data (SSE: its data lines joined; NDJSON: the line), or undefined for text that carries no event. */
  data?: string;
  /** The 1-based line the item starts on. */
  line: number;
  /**
   * The text held since the last event boundary passed CLIENT_SSE_LIMIT (or,
   * spec reading, an event longer than that): `raw` is that text, and
   * nothing after it is read as events. Client reading: the client's parser
   * fails the run here, and what follows is dropped. Spec reading: what
   * follows comes out as items of raw text only (no `data`), as it arrives,
   * so that a fixer passes it on without holding it.
   */
  overflow?: true;
}

/**
 * @ag-ui/client 1.0.0 fails the run when the SSE text it holds since the last
 * "\n\n" passes 10 MiB (in UTF-16 code units: the length of a JS string).
 */
export const CLIENT_SSE_LIMIT = 10 * 1024 * 1024;

const BOM = "\uFEFF";
/** A line that can only be SSE: a comment, or a field the SSE spec defines. */
const SSE_LINE = /^(?::|(?:data|event|id|retry)(?::|$))/;

/**
 * How SSE is read. "spec": as the HTML Standard says (fix, which must
 * understand every event a server meant to send). "client": as @ag-ui/client
 * 1.0.0's own transport reads it (check, which must see what the client
 * sees): see clientSse.
 */
export type SseReading = "spec" | "client";

export class EventReader {
  constructor(private readonly reading: SseReading = "spec") {}

  private readonly decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  private buf = "";
  /** Where the unfinished item starts in `buf`, and the offset up to which lines were read. */
  private start = 0;
  private pos = 0;
  /** The line number of the next line to read, and of the unfinished item's first line. */
  private lineNo = 1;
  private startLine = 1;
  /** The last line ended with a CR at the end of a chunk: a LF that follows belongs to it. */
  private pendingCR = false;
  /** The data lines of the block being read, joined with "\n" as they come; undefined before the first. */
  private data: string | undefined;
  private first = true;
  /** The limit was passed: nothing more is read as events, or held (see StreamItem.overflow). */
  private overflowed = false;
  framing: Framing | undefined;

  /** The length of the unfinished item held for the next chunk, in UTF-16 code units (at most CLIENT_SSE_LIMIT). */
  get held(): number {
    return this.buf.length - this.start;
  }

  /** The line the reader is at: where the input's end is, for a finding about it. */
  get line(): number {
    return this.lineNo;
  }

  /** The unfinished item's text itself: what a caller that fed it and must give up keeps (protocol/README.md §14, `pending`). */
  get heldText(): string {
    return this.buf.slice(this.start);
  }

  /** Reads a chunk of the input; returns the items it completes. */
  push(chunk: Uint8Array | string): StreamItem[] {
    const text = typeof chunk === "string" ? chunk : this.decoder.decode(chunk, { stream: true });
    return this.read(text, false);
  }

  /** The end of the input: whatever remains, an unterminated last line included. */
  end(): StreamItem[] {
    return this.read(this.decoder.decode(), true);
  }

  private read(text: string, last: boolean): StreamItem[] {
    const out: StreamItem[] = [];
    // Past the limit nothing is held (memory stays flat): the client has failed its run, and a fixer
    // passes the rest on as it comes.
    if (this.overflowed) {
      if (this.reading === "spec" && text !== "") out.push({ raw: text, line: this.lineNo });
      return out;
    }
    if (this.start > 0) {
      this.buf = this.buf.slice(this.start);
      this.pos -= this.start;
      this.start = 0;
    }
    this.buf += text;
    if (this.pendingCR && this.buf.length > this.pos) {
      this.pendingCR = false;
      // The LF of a CRLF split across chunks: part of the line before it.
      if (this.buf.charCodeAt(this.pos) === 10) {
        this.pos++;
        if (this.start === this.pos - 1) this.emit(out, undefined);
      }
    }
    if (this.framing === undefined && !this.detect(out, last)) return this.bounded(out, last);
    if (this.framing === "ndjson") this.ndjson(out, last);
    else if (this.reading === "client") this.clientSse(out, last);
    else this.sse(out, last);
    return this.bounded(out, last);
  }

  /**
   * Holds no more than CLIENT_SSE_LIMIT of an unfinished event, in every
   * framing and reading: @ag-ui/client 1.0.0 fails the run past it, and
   * without a bound one event that never ends would grow a long-running
   * fixer (a proxy, the sidecar's open streams) without end. Spec reading
   * (fix) also takes an event that did end, but is longer than the limit,
   * for one that passed it: whether the limit is passed before its end
   * arrives depends on how the input was cut, and fix's output must not
   * (the client, reading a socket's chunks, fails on such an event too).
   */
  private bounded(out: StreamItem[], last: boolean): StreamItem[] {
    if (this.reading === "spec") {
      const long = out.findIndex((item) => item.raw.length > CLIENT_SSE_LIMIT);
      if (long !== -1) return this.overflow(out, long);
    }
    if (last || this.buf.length - this.start <= CLIENT_SSE_LIMIT) return out;
    return this.overflow(out, out.length);
  }

  /** From out[from] on, everything read or held becomes one overflow item, and nothing more is held. */
  private overflow(out: StreamItem[], from: number): StreamItem[] {
    const rest = out.splice(from);
    out.push({ raw: rest.map((item) => item.raw).join("") + this.buf.slice(this.start), line: rest[0]?.line ?? this.startLine, overflow: true });
    this.overflowed = true;
    this.buf = "";
    this.start = this.pos = 0;
    this.data = undefined;
    return out;
  }

  /**
   * Settles the framing from the first non-blank line, once it is whole: SSE
   * when it is a comment or one of the SSE spec's fields (data, event, id,
   * retry), NDJSON otherwise. Blank lines before it pass through.
   */
  private detect(out: StreamItem[], last: boolean): boolean {
    let i = this.pos;
    if (this.first && this.buf.startsWith(BOM)) i++;
    for (; i < this.buf.length; i++) {
      const c = this.buf.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) continue;
      let end = i;
      while (end < this.buf.length && this.buf.charCodeAt(end) !== 10 && this.buf.charCodeAt(end) !== 13) end++;
      if (end === this.buf.length && !last) return false;
      this.framing = SSE_LINE.test(this.buf.slice(i, end)) ? "sse" : "ndjson";
      return true;
    }
    if (last && this.buf.length > this.start) this.emit(out, undefined, this.buf.length);
    return false;
  }

  private emit(out: StreamItem[], data: string | undefined, to = this.pos): void {
    const item: StreamItem = { raw: this.buf.slice(this.start, to), line: this.startLine };
    if (data !== undefined) item.data = data;
    out.push(item);
    this.start = to;
    this.startLine = this.lineNo;
    this.first = false;
  }

  private ndjson(out: StreamItem[], last: boolean): void {
    const buf = this.buf;
    for (;;) {
      const nl = buf.indexOf("\n", this.pos);
      const end = nl === -1 ? buf.length : nl;
      if (nl === -1 && !(last && end > this.start)) break;
      let content = buf.slice(this.start, end);
      if (content.charCodeAt(content.length - 1) === 13) content = content.slice(0, -1);
      if (this.first && content.startsWith(BOM)) content = content.slice(1);
      this.pos = nl === -1 ? end : nl + 1;
      this.lineNo++;
      // A line of JSON starts with "{": only a line that starts with whitespace (or is empty) may be blank.
      const c = content.charCodeAt(0);
      this.emit(out, content.length === 0 || ((c === 32 || c === 9 || c === 0xfeff) && /^[ \t\uFEFF]*$/.test(content)) ? undefined : content);
      if (nl === -1) break;
    }
  }

  private sse(out: StreamItem[], last: boolean): void {
    const buf = this.buf;
    const n = buf.length;
    // indexOf for the line ends, not a loop over charCodeAt: the engine's
    // search is several times faster, and the reader is half of fix's time.
    // `cr` is where the next CR is (n: none), so that a stream without CRs
    // is searched for one once per chunk, not once per line.
    let cr = -1;
    for (;;) {
      const pos = this.pos;
      if (cr < pos) cr = (cr = buf.indexOf("\r", pos)) === -1 ? n : cr;
      let i = buf.indexOf("\n", pos);
      if (i === -1 || cr < i) i = cr;
      if (i === n) {
        if (last && i > pos) this.field(buf, pos, i);
        if (last) {
          this.pos = i;
          if (this.pos > this.start) this.emit(out, this.data);
        }
        return;
      }
      // A CR at the end of what has arrived ends the line now; a LF after it is skipped when it comes.
      let next = i + 1;
      if (i === cr) {
        if (next < n) {
          if (buf.charCodeAt(next) === 10) next++;
        } else if (!last) this.pendingCR = true;
      }
      const blank = i === pos;
      if (!blank) this.field(buf, pos, i);
      this.pos = next;
      this.lineNo++;
      if (blank) {
        // Dispatch (or, for a block without data, pass its text through).
        this.emit(out, this.data);
        this.data = undefined;
      }
    }
  }

  /**
   * SSE as @ag-ui/client 1.0.0 reads it (parseSSEStream in its dist): the
   * text is cut into blocks at every "\n\n" and nowhere else, each block into
   * lines at "\n", and the lines that start with "data:" give its data (one
   * space after the colon dropped), joined with "\n". A block without such a
   * line carries no event. CR ends no line here: in a stream framed with CRLF
   * there is no "\n\n", so its events run together into one block, whose
   * joined data is not one JSON value (the client's run then fails). What is
   * left at the end of the input is a block too.
   */
  private clientSse(out: StreamItem[], last: boolean): void {
    const buf = this.buf;
    for (;;) {
      // pos is where the search resumes: one short of the end, so a "\n\n" split across chunks is found.
      const i = buf.indexOf("\n\n", Math.max(this.start, this.pos));
      if (i === -1) {
        if (last && buf.length > this.start) this.clientBlock(out, buf.length, buf.length);
        else this.pos = Math.max(this.start, buf.length - 1);
        return;
      }
      this.clientBlock(out, i, i + 2);
    }
  }

  /** Emits buf[start, to) as one block of the client's, whose text ends at `end`. */
  private clientBlock(out: StreamItem[], end: number, to: number): void {
    let block = this.buf.slice(this.start, end);
    // The client's TextDecoder drops a BOM at the start of the stream.
    if (this.first && block.startsWith(BOM)) block = block.slice(1);
    let data: string | undefined;
    for (const line of block.split("\n")) {
      if (!line.startsWith("data:")) continue;
      const value = line.slice(line.charCodeAt(5) === 32 ? 6 : 5);
      data = data === undefined ? value : data + "\n" + value;
    }
    for (let nl = this.buf.indexOf("\n", this.start); nl !== -1 && nl < to; nl = this.buf.indexOf("\n", nl + 1)) this.lineNo++;
    this.pos = to;
    this.emit(out, data, to);
  }

  /** One SSE line, buf[from, to): only `data` matters to the reader; the rest passes through in `raw`. */
  private field(buf: string, from: number, to: number): void {
    let value: string;
    if (buf.startsWith("data:", from)) {
      // The frequent case, read without slicing the line first.
      value = buf.slice(buf.charCodeAt(from + 5) === 32 ? from + 6 : from + 5, to);
    } else {
      let line = buf.slice(from, to);
      if (this.first && from === 0 && line.startsWith(BOM)) line = line.slice(1);
      if (line.charCodeAt(0) === 58 /* : */) return;
      const colon = line.indexOf(":");
      const name = colon === -1 ? line : line.slice(0, colon);
      if (name !== "data") return;
      value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.charCodeAt(0) === 32) value = value.slice(1);
    }
    this.data = this.data === undefined ? value : this.data + "\n" + value;
  }
}

/**
 * The lines of an SSE block, each with its terminator ("" for an unterminated last line). Line ends
 * are found with native searches: a block may hold a megabyte snapshot on one line, which a loop
 * over its characters read one by one (issue 41).
 */
function linesOf(raw: string): { text: string; end: string }[] {
  const out: { text: string; end: string }[] = [];
  let s = 0;
  let lf = raw.indexOf("\n");
  let cr = raw.indexOf("\r");
  while (lf !== -1 || cr !== -1) {
    const i = cr === -1 || (lf !== -1 && lf < cr) ? lf : cr;
    const end = i === cr && raw.charCodeAt(i + 1) === 10 ? "\r\n" : i === cr ? "\r" : "\n";
    out.push({ text: raw.slice(s, i), end });
    s = i + end.length;
    if (lf !== -1 && lf < s) lf = raw.indexOf("\n", s);
    if (cr !== -1 && cr < s) cr = raw.indexOf("\r", s);
  }
  if (s < raw.length) out.push({ text: raw.slice(s), end: "" });
  return out;
}

const isDataLine = (text: string): boolean => {
  const t = text.startsWith(BOM) ? text.slice(1) : text;
  return t === "data" || t.startsWith("data:");
};

/**
 * An SSE block with its data replaced: the first `data` line carries `data`
 * (one line: it is compact JSON), the other `data` lines go, and every other
 * line (comments, `id`, `event`, `retry`, the blank line) stays as it was.
 * With `data` undefined every `data` line goes; a block left with nothing but
 * its blank line is then "" (an `id` line kept without data still moves the
 * last event ID, as the SSE spec reads such a block).
 */
export function rewriteSse(raw: string, data: string | undefined): string {
  let out = "";
  let placed = false;
  let kept = false;
  for (const { text, end } of linesOf(raw)) {
    if (isDataLine(text)) {
      if (data !== undefined && !placed) {
        out += (text.startsWith(BOM) ? BOM : "") + "data: " + data + end;
        placed = true;
      } else if (text.startsWith(BOM)) out += BOM;
      continue;
    }
    if (text !== "") kept = true;
    out += text + end;
  }
  return placed || kept ? out : "";
}
