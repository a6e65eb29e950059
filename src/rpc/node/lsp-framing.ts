import type { Frame } from "../common/frame.js";
import { decodeBody, HEAD_BYTES, isJsonStart, isSpace, STRAY_HEAD_BYTES, type FrameDecoder } from "./frame-bytes.js";

const EMPTY = Buffer.alloc(0);
const MAX_HEADER_BYTES = 8192;
/** A header line, `name: value` (RFC 9110 §5.1: the name is a token). */
const HEADER_LINE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+:/;
const CONTENT_LENGTH = /^content-length:/i;
/** protocol/README.md §2: the bytes of an attachment that follow the body (a large text, as itself). */
const TEXT_LENGTH = /^agui-text-length:/i;
/** protocol/README.md §2: `Agui-Reply-Text: attachment` asks for the reply's text as an attachment. */
const REPLY_TEXT = /^agui-reply-text:/i;

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
  /** A body has been read: the input is LSP from here on. */
  private sawBody = false;
  /** Header lines of the block being read, and the bytes they took. */
  private lines = 0;
  private blockBytes = 0;
  /** The block's Content-Length: a number, "bad" for a value that is not one, undefined while none was seen. */
  private length: number | "bad" | undefined;
  private badValue = "";
  /** The block's Agui-Text-Length, as Content-Length's; and, while its body is read, the attachment's bytes at its end. */
  private attachLength: number | "bad" | undefined;
  private badAttach = "";
  private attached: number | undefined;
  /** The block's Agui-Reply-Text: "attachment", "bad" for another value, undefined when absent; then the body's. */
  private replyHeader: "attachment" | "bad" | undefined;
  private replyText = false;
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
      emit(this.discarding ? { kind: "oversized", bytes: this.got, head: this.head } : decodeBody(this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.got), this.attached, this.replyText));
      this.sawBody = true;
      this.want = -1;
      this.got = 0;
      this.parts = [];
      this.discarding = false;
      this.head = "";
      this.attached = undefined;
      this.replyText = false;
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
    this.attachLength = undefined;
    this.replyHeader = undefined;
    this.badValue = "";
  }

  /**
   * Under `auto`, until the first LSP body: a line that starts with `{` or
   * `[` is a JSON line. After it, such a line is read as `--framing lsp`
   * reads it: LSP bodies are not lines, and a `{` where a header belongs is
   * most likely what is left of a body whose Content-Length was too short;
   * read as NDJSON, it would take every later frame with it.
   */
  private get jsonLines(): boolean {
    return this.auto && !this.sawBody;
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
        if (this.jsonLines && isJsonStart(this.buf[0])) {
          // A JSON line, unless it runs into a header: then it is what is left of a body (a
          // Content-Length too short, or a broken block's body), as --framing lsp reads it.
          const leftover = this.leftover();
          if (leftover === undefined) return "more";
          const reported = this.afterBad;
          this.afterBad = false;
          if (leftover < 0) return "json";
          // A broken block's body was answered with the block's -32600.
          if (!reported) emit({ kind: "bad-header", detail: "bytes before Content-Length" });
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
        this.afterBad = this.jsonLines;
        this.buf = this.buf.subarray(1);
        continue;
      }
      const end = nl > 0 && this.buf[nl - 1] === 13 ? nl - 1 : nl;
      const line = this.buf.toString("latin1", 0, end);
      if (line === "") {
        // The blank line that ends a block (at the start of one, blank lines were skipped above).
        this.buf = this.buf.subarray(nl + 1);
        const length = this.length;
        const attached = this.attachLength;
        const replyHeader = this.replyHeader;
        const detail = length === undefined ? "missing Content-Length" : length === "bad" ? `bad Content-Length ${JSON.stringify(this.badValue)}` : attached === "bad" ? `bad Agui-Text-Length ${JSON.stringify(this.badAttach)}` : replyHeader === "bad" ? `bad Agui-Reply-Text ${JSON.stringify(this.badAttach)} (it takes "attachment")` : undefined;
        this.endBlock();
        if (detail === undefined) {
          // The attachment follows the body: the frame is both, held to the message limit as one (§7).
          this.attached = attached as number | undefined;
          this.replyText = replyHeader === "attachment";
          this.want = (length as number) + (this.attached ?? 0);
          this.discarding = this.want > this.max;
          return "body";
        }
        emit({ kind: "bad-header", detail });
        // What follows is a body of unknown length. While JSON lines are read
        // (auto), it is read as the start of a message, so that a JSON line
        // there is not lost; else skipped to the next Content-Length.
        if (this.jsonLines) this.afterBad = true;
        else this.resyncing = true;
        continue;
      }
      if (HEADER_LINE.test(line)) {
        if (CONTENT_LENGTH.test(line)) {
          const value = line.slice("content-length:".length).replace(/^[ \t]+|[ \t]+$/g, "");
          const n = /^\d+$/.test(value) ? Number(value) : NaN;
          this.length = Number.isSafeInteger(n) ? n : "bad";
          this.badValue = value.slice(0, 40);
        } else if (TEXT_LENGTH.test(line)) {
          const value = line.slice("agui-text-length:".length).replace(/^[ \t]+|[ \t]+$/g, "");
          const n = /^\d+$/.test(value) ? Number(value) : NaN;
          this.attachLength = Number.isSafeInteger(n) ? n : "bad";
          this.badAttach = value.slice(0, 40);
        } else if (REPLY_TEXT.test(line)) {
          const value = line.slice("agui-reply-text:".length).replace(/^[ \t]+|[ \t]+$/g, "");
          this.replyHeader = value.toLowerCase() === "attachment" ? "attachment" : "bad";
          this.badAttach = value.slice(0, 40);
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
    const m = (this.jsonLines ? /content-length:|\n/i : /content-length:/i).exec(this.buf.toString("latin1", from));
    this.resyncing = !m;
    if (m) {
      this.buf = this.buf.subarray(from + m.index + (m[0] === "\n" ? 1 : 0));
      return true;
    }
    this.buf = this.buf.subarray(Math.max(from, this.buf.length - 32));
    return false;
  }
}
