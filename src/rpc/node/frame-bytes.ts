/** What both framings share (protocol/README.md §2): the decoder's shape, and how a body becomes a frame. */
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
export const HEAD_BYTES = 4096;
/** How many bytes of a stray line a -32700 quotes (the message shows fewer, escaped). */
export const STRAY_HEAD_BYTES = 256;

/**
 * A body as a frame; `attached` bytes at its end (LSP's `Agui-Text-Length`) are the frame's
 * attachment, and `replyText` (LSP's `Agui-Reply-Text: attachment`) asks for the reply's text as one.
 */
export function decodeBody(body: Buffer, attached?: number, replyText = false): Frame {
  if (attached === undefined) {
    if (!isUtf8(body)) return { kind: "bad-utf8" };
    // Written out rather than spread: a spread makes a new object shape per message, a fixed cost on every call.
    const text = body.toString("utf8");
    return replyText ? { kind: "text", text, replyText: true } : { kind: "text", text };
  }
  const at = body.length - attached;
  if (!isUtf8(body.subarray(0, at)) || !isUtf8(body.subarray(at))) return { kind: "bad-utf8" };
  const text = body.toString("utf8", 0, at);
  const attachment = body.toString("utf8", at);
  return replyText ? { kind: "text", text, attachment, replyText: true } : { kind: "text", text, attachment };
}

export const isJsonStart = (c: number | undefined): boolean => c === 0x7b || c === 0x5b;
export const isSpace = (c: number | undefined): boolean => c === 32 || c === 9 || c === 13 || c === 10;
