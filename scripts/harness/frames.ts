import { isUtf8 } from "node:buffer";

/**
 * The sidecar's two framings (protocol/README.md §2), both ways: encoders for
 * what a test sends, and one incremental, strict parser for what the sidecar
 * writes. Strict means stdout carries whole frames and nothing else: every
 * byte belongs to a frame, every frame body is UTF-8 JSON, and a stream that
 * stops does so on a frame boundary. Anything else throws.
 */

export type Framing = "ndjson" | "lsp";

/** One NDJSON line per message; a string is sent as the line verbatim. */
export function ndjson(...messages: unknown[]): string {
  return messages.map((m) => (typeof m === "string" ? m : JSON.stringify(m)) + "\n").join("");
}

/** One LSP `Content-Length` frame per message; a string is sent as the body verbatim. */
export function lsp(...messages: unknown[]): Buffer {
  return Buffer.concat(
    messages.map((m) => {
      const body = Buffer.from(typeof m === "string" ? m : JSON.stringify(m), "utf8");
      return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "latin1"), body]);
    }),
  );
}

export function encode(framing: Framing, ...messages: unknown[]): Buffer {
  return framing === "ndjson" ? Buffer.from(ndjson(...messages), "utf8") : lsp(...messages);
}

/** One frame's body: strict UTF-8, then JSON. Throws, naming `where`, on anything else. */
function parseBody(body: Buffer, where: string): unknown {
  if (!isUtf8(body)) throw new Error(`stdout ${where} is not valid UTF-8`);
  const text = body.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`stdout ${where} is not JSON: ${JSON.stringify(text.slice(0, 300))}`);
  }
}

/**
 * The one header the sidecar writes: `Content-Length: N\r\n\r\n`, nothing
 * else. HEADER_MAX is the longest such header (N of 16 digits is past any
 * message a test makes); a partial header is held back only while it could
 * still become one, so garbage fails at once, not after some window of bytes.
 */
const PREFIX = "Content-Length: ";
const HEADER = /^Content-Length: (\d{1,16})\r\n\r\n/;
const HEADER_MAX = PREFIX.length + 16 + 4;
const PARTIAL_TAIL = /^\d{0,16}$|^\d{1,16}(\r|\r\n|\r\n\r)$/;

function couldBeHeader(text: string): boolean {
  if (text.length <= PREFIX.length) return PREFIX.startsWith(text);
  return text.startsWith(PREFIX) && PARTIAL_TAIL.test(text.slice(PREFIX.length));
}

/** Incremental, strict parser of the sidecar's stdout. */
export class FrameParser {
  private buf: Buffer = Buffer.alloc(0);
  /** Bytes consumed so far, for messages that say where in stdout a fault is. */
  private offset = 0;

  constructor(readonly framing: Framing) {}

  /** Bytes of an incomplete frame held back. 0 means stdout so far ends on a frame boundary. */
  get pending(): number {
    return this.buf.length;
  }

  /** Takes a chunk; returns the bodies of the frames it completes. Throws on anything that is not a frame. */
  bodies(chunk: Buffer): Buffer[] {
    return this.split(chunk).map(([body]) => body);
  }

  /** Takes a chunk; returns the frames it completes, parsed. Throws on anything that is not a frame. */
  push(chunk: Buffer): unknown[] {
    return this.split(chunk).map(([body, at]) => parseBody(body, `${this.framing === "ndjson" ? "line" : "frame"} at byte ${at}`));
  }

  /** The end of stdout: throws if it stops inside a frame. */
  end(): void {
    if (this.buf.length) throw new Error(`stdout ends inside a frame at byte ${this.offset}: ${JSON.stringify(this.buf.subarray(0, 200).toString("latin1"))}`);
  }

  /** The bodies a chunk completes, each with the stdout offset of its frame. */
  private split(chunk: Buffer): [Buffer, number][] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: [Buffer, number][] = [];
    let at = 0;
    for (;;) {
      const where = this.offset + at;
      if (this.framing === "ndjson") {
        const nl = this.buf.indexOf(10, at);
        if (nl === -1) break;
        const line = this.buf.subarray(at, nl);
        if (line.length === 0) throw new Error(`stdout has a blank line at byte ${where}`);
        if (line.includes(13)) throw new Error(`stdout line at byte ${where} contains \\r`);
        out.push([line, where]);
        at = nl + 1;
      } else {
        const text = this.buf.subarray(at, at + HEADER_MAX).toString("latin1");
        const head = HEADER.exec(text);
        if (!head) {
          if (couldBeHeader(text)) break;
          throw new Error(`stdout at byte ${where} is not a Content-Length header: ${JSON.stringify(text)}`);
        }
        const start = at + head[0].length;
        const end = start + Number(head[1]);
        if (end > this.buf.length) break;
        out.push([this.buf.subarray(start, end), where]);
        at = end;
      }
    }
    this.buf = this.buf.subarray(at);
    this.offset += at;
    return out;
  }
}

/** All of a finished stdout as frames of `framing`, strictly (see FrameParser). */
export function parseFrames(framing: Framing, out: Buffer): unknown[] {
  const p = new FrameParser(framing);
  const frames = p.push(out);
  p.end();
  return frames;
}

export const parseNdjson = (out: Buffer): unknown[] => parseFrames("ndjson", out);
export const parseLsp = (out: Buffer): unknown[] => parseFrames("lsp", out);
