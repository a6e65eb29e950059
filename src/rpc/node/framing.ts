import { isUtf8 } from "node:buffer";
import type { Frame } from "../common/frame.js";

export interface FrameDecoder {
  push(chunk: Buffer, emit: (f: Frame) => void): void;
  /** The stream ended; anything partial is dropped. */
  readonly pending: boolean;
}

/** How many bytes of an oversized message are kept to look for its id. */
const HEAD_BYTES = 4096;

function decodeBody(body: Buffer): Frame {
  return isUtf8(body) ? { kind: "text", text: body.toString("utf8") } : { kind: "bad-utf8" };
}

/**
 * Newline-delimited JSON (protocol/README.md §2): one message per line, `\r\n`
 * tolerated, blank lines ignored. A line longer than `max` bytes is skipped as
 * it streams in: only its first HEAD_BYTES are kept.
 */
export class NdjsonDecoder implements FrameDecoder {
  private parts: Buffer[] = [];
  private length = 0;
  private discarding = false;
  private head = "";

  constructor(private readonly max: number) {}

  get pending(): boolean {
    return this.length > 0 || this.discarding;
  }

  push(chunk: Buffer, emit: (f: Frame) => void): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      this.take(chunk.subarray(start, end));
      if (nl === -1) return;
      this.finish(emit);
      start = nl + 1;
    }
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
      let line = this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.length);
      if (line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
      if (line.length > this.max) emit({ kind: "oversized", bytes: line.length, head: headOf([line]) });
      else if (!isBlank(line)) emit(decodeBody(line));
    }
    this.parts = [];
    this.length = 0;
    this.discarding = false;
    this.head = "";
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
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c !== 32 && c !== 9 && c !== 13 && c !== 10) return false;
  }
  return true;
}

const HEADER_END = Buffer.from("\r\n\r\n");
const EMPTY = Buffer.alloc(0);
const MAX_HEADER_BYTES = 8192;
const CONTENT_LENGTH = /^content-length:[ \t]*(\d+)[ \t]*$/im;

/**
 * LSP-style framing: `Content-Length: N\r\n\r\n` then N bytes. A header block
 * without a valid Content-Length is reported, and the decoder skips ahead to the
 * next `Content-Length:` so one bad frame cannot desynchronize the stream for
 * good. A body over `max` bytes is skipped as it streams in.
 */
export class LspDecoder implements FrameDecoder {
  /** Header bytes not yet parsed (small: a header block is at most MAX_HEADER_BYTES). */
  private buf: Buffer = EMPTY;
  /** Body length from Content-Length, or -1 while reading headers. */
  private want = -1;
  /** Body bytes seen so far; kept as a list and joined once, not re-copied per chunk. */
  private got = 0;
  private parts: Buffer[] = [];
  private discarding = false;
  private head = "";
  /** After a bad header block: looking for the next `Content-Length:`. */
  private resyncing = false;

  constructor(private readonly max: number) {}

  get pending(): boolean {
    return (this.buf.length > 0 && !this.resyncing) || this.want !== -1;
  }

  push(chunk: Buffer, emit: (f: Frame) => void): void {
    let rest = chunk;
    for (;;) {
      if (this.want === -1) {
        if (rest.length) this.buf = this.buf.length ? Buffer.concat([this.buf, rest]) : rest;
        if (!this.readHeaders(emit)) return;
        // What follows the header block is body (and maybe further frames).
        rest = this.buf;
        this.buf = EMPTY;
        continue;
      }
      if (rest.length === 0 && this.got < this.want) return;
      const n = Math.min(this.want - this.got, rest.length);
      const piece = rest.subarray(0, n);
      rest = rest.subarray(n);
      if (!this.discarding) this.parts.push(piece);
      else if (this.head.length < HEAD_BYTES) this.head += piece.subarray(0, HEAD_BYTES - this.head.length).toString("utf8");
      this.got += n;
      if (this.got < this.want) return;
      emit(this.discarding ? { kind: "oversized", bytes: this.got, head: this.head } : decodeBody(this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.got)));
      this.reset();
    }
  }

  private reset(): void {
    this.want = -1;
    this.got = 0;
    this.parts = [];
    this.discarding = false;
    this.head = "";
  }

  /** Returns false when more bytes are needed. */
  private readHeaders(emit: (f: Frame) => void): boolean {
    if (this.resyncing) return this.resync(0);
    // Whitespace between frames (a stray newline after a body) is not a header.
    let i = 0;
    while (i < this.buf.length && (this.buf[i] === 10 || this.buf[i] === 13 || this.buf[i] === 32 || this.buf[i] === 9)) i++;
    if (i) this.buf = this.buf.subarray(i);
    if (this.buf.length === 0) return false;
    const end = this.buf.indexOf(HEADER_END);
    if (end === -1) {
      if (this.buf.length <= MAX_HEADER_BYTES) return false;
      emit({ kind: "bad-header", detail: `no end of headers within ${MAX_HEADER_BYTES} bytes` });
      return this.resync(1);
    }
    const headers = this.buf.subarray(0, end).toString("latin1");
    const m = CONTENT_LENGTH.exec(headers);
    const length = m ? Number(m[1]) : NaN;
    const later = m ? -1 : headers.slice(1).search(/content-length:/i);
    if (later >= 0) {
      // Leftovers of a body whose Content-Length was too short run into the
      // next header: report them and start again at that header, not past it.
      emit({ kind: "bad-header", detail: "bytes before Content-Length" });
      this.buf = this.buf.subarray(later + 1);
      return true;
    }
    if (!Number.isSafeInteger(length)) {
      emit({ kind: "bad-header", detail: m ? `bad Content-Length ${JSON.stringify(m[1])}` : "missing Content-Length" });
      return this.resync(end + HEADER_END.length);
    }
    this.buf = this.buf.subarray(end + HEADER_END.length);
    this.want = length;
    this.discarding = length > this.max;
    return true;
  }

  /**
   * Drops bytes up to the next `Content-Length:`. With
   * none in sight, keeps a short tail (the header may be split across chunks)
   * and waits for more.
   */
  private resync(from: number): boolean {
    // Anywhere, not only at a line start: LSP frames follow each other with no newline.
    const m = /content-length:/i.exec(this.buf.toString("latin1", from));
    this.resyncing = !m;
    if (m) {
      this.buf = this.buf.subarray(from + m.index);
      return true;
    }
    this.buf = this.buf.subarray(Math.max(from, this.buf.length - 32));
    return false;
  }
}

/**
 * protocol/README.md §2 auto mode: the first non-whitespace byte decides; `{` or `[`
 * means newline-delimited JSON, anything else LSP headers.
 */
export function detectFraming(chunk: Buffer): "ndjson" | "lsp" | undefined {
  for (let i = 0; i < chunk.length; i++) {
    const c = chunk[i];
    if (c === 32 || c === 9 || c === 10 || c === 13) continue;
    return c === 0x7b || c === 0x5b ? "ndjson" : "lsp";
  }
  return undefined;
}
