import { isUtf8 } from "node:buffer";
import type { Frame } from "../common/frame.js";

export interface FrameDecoder {
  push(chunk: Buffer, emit: (f: Frame) => void): void;
  /** The stream ended; anything partial is dropped. */
  readonly pending: boolean;
  /** The framing of the last message read, which its reply uses (protocol/README.md §2); undefined before the first. */
  readonly framing: "ndjson" | "lsp" | undefined;
}

/** How many bytes of an oversized message are kept to look for its id. */
const HEAD_BYTES = 4096;
/** How many bytes of a stray line a -32700 quotes (the message shows fewer, escaped). */
const STRAY_HEAD_BYTES = 256;

function decodeBody(body: Buffer): Frame {
  return isUtf8(body) ? { kind: "text", text: body.toString("utf8") } : { kind: "bad-utf8" };
}

const isJsonStart = (c: number | undefined): boolean => c === 0x7b || c === 0x5b;
const isSpace = (c: number | undefined): boolean => c === 32 || c === 9 || c === 13 || c === 10;

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
  for (let i = 0; i < b.length; i++) if (!isSpace(b[i])) return false;
  return true;
}

const EMPTY = Buffer.alloc(0);
const MAX_HEADER_BYTES = 8192;
/** A header line, `name: value` (RFC 9110 §5.1: the name is a token). */
const HEADER_LINE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+:/;
const CONTENT_LENGTH = /^content-length:/i;

/**
 * LSP-style framing: `Content-Length: N\r\n\r\n` then N bytes. The header
 * block is read line by line, so that nothing which is not one can hold the
 * reader waiting for its end (protocol/README.md §2):
 * - at the start of a message, a line that is not a header (`name: value`) is
 *   a stray line: reported (-32700), and reading goes on at the next line;
 *   under `auto`, a line that starts with `{` or `[` is handed back (`feed`)
 *   to be read as NDJSON;
 * - a header block that a line which is not a header cuts off, that does not
 *   end within MAX_HEADER_BYTES, or that ends without a valid Content-Length,
 *   is reported; after the last two the decoder skips ahead to the next
 *   `Content-Length:`, since what follows is a body of unknown length.
 * Lines end with `\r\n` or `\n`. A body over `max` bytes is skipped as it
 * streams in.
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
  /** After a bad header block: looking for the next `Content-Length:` (under `auto`, or the next line). */
  private resyncing = false;
  /** Under `auto`, right after a bad header block: a JSON line may be the broken frame's body, run into the next header. */
  private afterBad = false;
  /** Header lines of the block being read, and the bytes they took. */
  private lines = 0;
  private blockBytes = 0;
  /** The block's Content-Length: a number, "bad" for a value that is not one, undefined while none was seen. */
  private length: number | "bad" | undefined;
  private badValue = "";
  readonly framing = "lsp";

  constructor(
    private readonly max: number,
    private readonly auto = false,
  ) {}

  get pending(): boolean {
    return (this.buf.length > 0 && !this.resyncing) || this.want !== -1 || this.lines > 0;
  }

  push(chunk: Buffer, emit: (f: Frame) => void): void {
    this.feed(chunk, emit);
  }

  /** Reads what it can; under `auto`, returns the bytes from a JSON line at the start of a message on. */
  feed(chunk: Buffer, emit: (f: Frame) => void): Buffer | undefined {
    let rest = chunk;
    for (;;) {
      if (this.want === -1) {
        if (rest.length) this.buf = this.buf.length ? Buffer.concat([this.buf, rest]) : rest;
        const r = this.readHeaders(emit);
        if (r === "json") {
          const out = this.buf;
          this.buf = EMPTY;
          return out;
        }
        if (r === "more") return undefined;
        // What follows the header block is body (and maybe further frames).
        rest = this.buf;
        this.buf = EMPTY;
        continue;
      }
      if (rest.length === 0 && this.got < this.want) return undefined;
      const n = Math.min(this.want - this.got, rest.length);
      const piece = rest.subarray(0, n);
      rest = rest.subarray(n);
      if (!this.discarding) this.parts.push(piece);
      else if (this.head.length < HEAD_BYTES) this.head += piece.subarray(0, HEAD_BYTES - this.head.length).toString("utf8");
      this.got += n;
      if (this.got < this.want) return undefined;
      emit(this.discarding ? { kind: "oversized", bytes: this.got, head: this.head } : decodeBody(this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.got)));
      this.want = -1;
      this.got = 0;
      this.parts = [];
      this.discarding = false;
      this.head = "";
    }
  }

  /**
   * Where `Content-Length:` starts in the line at the head of `buf`: -1 when
   * the line has none, undefined while the line has not ended (up to
   * MAX_HEADER_BYTES of it).
   */
  private leftover(): number | undefined {
    const nl = this.buf.indexOf(10);
    const upTo = nl === -1 ? Math.min(this.buf.length, MAX_HEADER_BYTES) : nl;
    const at = this.buf.toString("latin1", 0, upTo).search(/content-length:/i);
    if (at >= 0) return at;
    return nl === -1 && this.buf.length <= MAX_HEADER_BYTES ? undefined : -1;
  }

  private endBlock(): void {
    this.lines = 0;
    this.blockBytes = 0;
    this.length = undefined;
    this.badValue = "";
  }

  /** Reads header lines from `buf`: "body" once a block is complete, "more" when bytes are needed, "json" at a JSON line (auto). */
  private readHeaders(emit: (f: Frame) => void): "body" | "more" | "json" {
    for (;;) {
      if (this.resyncing && !this.resync(0)) return "more";
      if (this.lines === 0) {
        // Whitespace between frames (a stray newline after a body) is not a header.
        let i = 0;
        while (i < this.buf.length && isSpace(this.buf[i])) i++;
        if (i) this.buf = this.buf.subarray(i);
        if (this.buf.length === 0) return "more";
        if (this.auto && isJsonStart(this.buf[0])) {
          if (!this.afterBad) return "json";
          const leftover = this.leftover();
          if (leftover === undefined) return "more";
          this.afterBad = false;
          if (leftover < 0) return "json";
          // The broken frame's body, which its -32600 already answered: skipped, as --framing lsp skips it.
          this.buf = this.buf.subarray(leftover);
          continue;
        }
      }
      const nl = this.buf.indexOf(10);
      if (nl === -1) {
        // A header split across chunks: wait for its end, but not for ever.
        if (this.blockBytes + this.buf.length <= MAX_HEADER_BYTES) return "more";
        emit({ kind: "bad-header", detail: `no end of headers within ${MAX_HEADER_BYTES} bytes` });
        this.endBlock();
        this.resyncing = true;
        this.afterBad = this.auto;
        this.buf = this.buf.subarray(1);
        continue;
      }
      const end = nl > 0 && this.buf[nl - 1] === 13 ? nl - 1 : nl;
      const line = this.buf.toString("latin1", 0, end);
      if (line === "") {
        // The blank line that ends a block (at the start of one, blank lines were skipped above).
        this.buf = this.buf.subarray(nl + 1);
        const length = this.length;
        const detail = length === undefined ? "missing Content-Length" : length === "bad" ? `bad Content-Length ${JSON.stringify(this.badValue)}` : undefined;
        this.endBlock();
        if (detail === undefined) {
          this.want = length as number;
          this.discarding = this.want > this.max;
          return "body";
        }
        emit({ kind: "bad-header", detail });
        // What follows is a body of unknown length. Under `auto` it is read as
        // the start of a message, so that a JSON line there is not lost.
        if (this.auto) this.afterBad = true;
        else this.resyncing = true;
        continue;
      }
      if (HEADER_LINE.test(line)) {
        if (CONTENT_LENGTH.test(line)) {
          const value = line.slice("content-length:".length).replace(/^[ \t]+|[ \t]+$/g, "");
          const n = /^\d+$/.test(value) ? Number(value) : NaN;
          this.length = Number.isSafeInteger(n) ? n : "bad";
          this.badValue = value.slice(0, 40);
        }
        this.lines++;
        this.afterBad = false;
        this.blockBytes += nl + 1;
        this.buf = this.buf.subarray(nl + 1);
        continue;
      }
      // Not a header line.
      const later = line.search(/content-length:/i);
      if (later > 0) {
        // Leftovers of a body whose Content-Length was too short run into the
        // next header: report them and start again at that header, not past it.
        emit({ kind: "bad-header", detail: "bytes before Content-Length" });
        this.endBlock();
        this.buf = this.buf.subarray(later);
        continue;
      }
      if (this.lines > 0) {
        // The line is read again as the start of a message: a JSON line after a broken block is not lost.
        emit({ kind: "bad-header", detail: "a line that is not a header cut the header block off" });
        this.endBlock();
        continue;
      }
      emit({ kind: "stray-line", head: this.buf.subarray(0, Math.min(end, STRAY_HEAD_BYTES)).toString("utf8"), bytes: end, json: this.auto });
      this.afterBad = false;
      this.buf = this.buf.subarray(nl + 1);
    }
  }

  /**
   * Drops bytes up to the next `Content-Length:`. With none in sight, keeps
   * a short tail (the header may be split across chunks) and waits for more.
   */
  private resync(from: number): boolean {
    // Anywhere, not only at a line start: LSP frames follow each other with no newline.
    const m = (this.auto ? /content-length:|\n/i : /content-length:/i).exec(this.buf.toString("latin1", from));
    this.resyncing = !m;
    if (m) {
      this.buf = this.buf.subarray(from + m.index + (m[0] === "\n" ? 1 : 0));
      return true;
    }
    this.buf = this.buf.subarray(Math.max(from, this.buf.length - 32));
    return false;
  }
}

/**
 * protocol/README.md §2, `--framing auto`: each message's first byte decides
 * its framing, so neither framing can leave the other waiting. At the start of
 * a message (after white space), `{` or `[` starts an NDJSON line; anything
 * else is read as LSP, where a line that is not a header is a stray line,
 * answered with -32700, and reading goes on at the next line. A client keeps
 * to one framing; the rule only makes sure that a stray line, or a message in
 * the other framing, is answered instead of waited on.
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
    // A stray line or a bad header block is answered in the framing of the messages so far (NDJSON before any).
    const mark = (f: Frame): void => {
      if (f.kind !== "stray-line" && f.kind !== "bad-header") this.framing = this.current.framing;
      emit(f);
    };
    let rest: Buffer | undefined = chunk;
    while (rest !== undefined && rest.length > 0) {
      rest = this.current.feed(rest, mark);
      if (rest !== undefined) this.current = this.current === this.lsp ? this.ndjson : this.lsp;
    }
  }
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
