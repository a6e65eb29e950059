import type { Frame } from "../common/frame.js";
import { decodeBody, HEAD_BYTES, isJsonStart, isSpace, type FrameDecoder } from "./frame-bytes.js";
import { LspDecoder } from "./lsp-framing.js";

export type { FrameDecoder } from "./frame-bytes.js";
export { LspDecoder } from "./lsp-framing.js";

/**
 * Newline-delimited JSON (protocol/README.md §2): one message per line, `\r\n`
 * tolerated, blank lines ignored. A line longer than `max` bytes is skipped as
 * it streams in: only its first HEAD_BYTES are kept.
 *
 * Under `auto` it stops at a line that starts with neither `{`, `[` nor white
 * space, and hands the bytes from there back (`feed`): AutoDecoder reads that
 * line as LSP.
 */
export class NdjsonDecoder implements FrameDecoder {
  private parts: Buffer[] = [];
  private length = 0;
  private discarding = false;
  private head = "";
  readonly framing = "ndjson";

  constructor(
    private readonly max: number,
    private readonly auto = false,
  ) {}

  get pending(): boolean {
    return this.length > 0 || this.discarding;
  }

  push(chunk: Buffer, emit: (f: Frame) => void): void {
    this.feed(chunk, emit);
  }

  /** Reads what it can; under `auto`, returns the bytes from the first line that is not NDJSON on. */
  feed(chunk: Buffer, emit: (f: Frame) => void): Buffer | undefined {
    let start = 0;
    while (start < chunk.length) {
      // At the start of a line (the check is one byte per line, not per byte).
      if (this.auto && this.length === 0 && !this.discarding && !isJsonStart(chunk[start]) && !isSpace(chunk[start])) return chunk.subarray(start);
      const nl = chunk.indexOf(10, start);
      // The usual line, whole in this chunk with nothing held before it, is read where it lies:
      // no pieces to hold and join, a fixed cost on every call (docs/benchmarks.md, "What changed").
      if (nl !== -1 && this.length === 0 && !this.discarding && nl - start <= this.max + 1) {
        this.line(chunk.subarray(start, nl), emit);
        start = nl + 1;
        continue;
      }
      const end = nl === -1 ? chunk.length : nl;
      this.take(chunk.subarray(start, end));
      if (nl === -1) return undefined;
      this.finish(emit);
      start = nl + 1;
    }
    return undefined;
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    // One byte of slack for the "\r" of a "\r\n" ending, which is not part of the message.
    if (!this.discarding && this.length + piece.length > this.max + 1) {
      this.head = headOf([...this.parts, piece]);
      this.parts = [];
      this.discarding = true;
    }
    if (!this.discarding) this.parts.push(piece);
    this.length += piece.length;
  }

  private finish(emit: (f: Frame) => void): void {
    if (this.discarding) {
      emit({ kind: "oversized", bytes: this.length, head: this.head });
    } else if (this.length > 0) {
      this.line(this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.length), emit);
    }
    this.parts = [];
    this.length = 0;
    this.discarding = false;
    this.head = "";
  }

  /** One line's bytes, its "\n" left off: a frame, an oversized one, or nothing for a blank line. */
  private line(bytes: Buffer, emit: (f: Frame) => void): void {
    const line = bytes[bytes.length - 1] === 13 ? bytes.subarray(0, bytes.length - 1) : bytes;
    if (line.length > this.max) emit({ kind: "oversized", bytes: line.length, head: headOf([line]) });
    else if (line.length > 0 && !isBlank(line)) emit(decodeBody(line));
  }
}

/** The first HEAD_BYTES of a message held in pieces, without joining all of it. */
function headOf(pieces: Buffer[]): string {
  const out: Buffer[] = [];
  let n = 0;
  for (const p of pieces) {
    if (n >= HEAD_BYTES) break;
    out.push(p.subarray(0, HEAD_BYTES - n));
    n += Math.min(p.length, HEAD_BYTES - n);
  }
  return Buffer.concat(out, n).toString("utf8");
}

function isBlank(b: Buffer): boolean {
  for (let i = 0; i < b.length; i++) if (!isSpace(b[i])) return false;
  return true;
}

/**
 * protocol/README.md §2, `--framing auto`: each message's first byte decides
 * its framing, so that no line leaves a later message waiting. At the start
 * of a message (after white space), `{` or `[` starts an NDJSON line, until
 * an LSP body has been read (LspDecoder.jsonLines); anything else is read as
 * LSP, where a line that is not a header is a stray line, answered with
 * -32700, and reading goes on at the next line.
 */
export class AutoDecoder implements FrameDecoder {
  private readonly ndjson: NdjsonDecoder;
  private readonly lsp: LspDecoder;
  private current: NdjsonDecoder | LspDecoder;
  framing: "ndjson" | "lsp" | undefined;

  constructor(max: number) {
    this.ndjson = new NdjsonDecoder(max, true);
    this.lsp = new LspDecoder(max, true);
    // At a message's start, the LSP reader looks at the first byte and hands a JSON line over.
    this.current = this.lsp;
  }

  get pending(): boolean {
    return this.current.pending;
  }

  push(chunk: Buffer, emit: (f: Frame) => void): void {
    this.emit = emit;
    let rest: Buffer | undefined = chunk;
    while (rest !== undefined && rest.length > 0) {
      rest = this.current.feed(rest, this.mark);
      if (rest !== undefined) this.current = this.current === this.lsp ? this.ndjson : this.lsp;
    }
  }

  /** Where push() hands its frames. */
  private emit: (f: Frame) => void = () => undefined;

  /**
   * A stray line or a bad header block is answered in the framing of the messages so far (NDJSON
   * before any). Made once, not per chunk: a closure per read was part of the fixed cost per call.
   */
  private readonly mark = (f: Frame): void => {
    if (f.kind !== "stray-line" && f.kind !== "bad-header") this.framing = this.current.framing;
    this.emit(f);
  };
}

const BOM = [0xef, 0xbb, 0xbf];

/** Skips a UTF-8 byte order mark at the very start of the input, which may come split across chunks. */
class BomSkipper implements FrameDecoder {
  private seen = 0;
  private done = false;

  constructor(private readonly inner: FrameDecoder) {}

  get pending(): boolean {
    return this.inner.pending || (!this.done && this.seen > 0);
  }

  get framing(): "ndjson" | "lsp" | undefined {
    return this.inner.framing;
  }

  push(chunk: Buffer, emit: (f: Frame) => void): void {
    if (this.done) return this.inner.push(chunk, emit);
    let i = 0;
    while (i < chunk.length && this.seen < 3 && chunk[i] === BOM[this.seen]) {
      i++;
      this.seen++;
    }
    if (this.seen === 3) this.done = true;
    else if (i < chunk.length) {
      this.done = true;
      // Not a BOM after all: the bytes taken for one (from earlier chunks too) are given back.
      if (this.seen > 0) return this.inner.push(Buffer.concat([Buffer.from(BOM.slice(0, this.seen)), chunk.subarray(i)]), emit);
    }
    if (i < chunk.length) this.inner.push(chunk.subarray(i), emit);
  }
}

/** The decoder for a `--framing` (protocol/README.md §2), which skips a leading UTF-8 BOM. */
export function decoderFor(framing: "auto" | "ndjson" | "lsp", max: number): FrameDecoder {
  return new BomSkipper(framing === "auto" ? new AutoDecoder(max) : framing === "ndjson" ? new NdjsonDecoder(max) : new LspDecoder(max));
}
