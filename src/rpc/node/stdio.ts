import type { Readable, Writable } from "node:stream";
import type { AttachedReply } from "../common/dispatch.js";
import type { Frame } from "../common/frame.js";
import { decoderFor, type FrameDecoder } from "./framing.js";

export type Framing = "auto" | "ndjson" | "lsp";

export interface ReaderEvents {
  frame(f: Frame): void;
  /** The input ended. */
  end(): void;
  error(e: Error): void;
}

/**
 * Reads frames from a byte stream in either framing (protocol/README.md §2).
 * It hands on frames, not parsed messages: a JSON-RPC batch is an array,
 * which vscode-jsonrpc's Message type cannot express, and a parse error must
 * still be answered. (So it is not a vscode-jsonrpc MessageReader.)
 */
export class FramedReader {
  private readonly decoder: FrameDecoder;
  /** Called around the frames of each chunk read, so their replies can leave in one write. */
  batch: { begin(): void; end(): void } | undefined;

  constructor(
    private readonly input: Readable,
    framing: Framing,
    maxMessageBytes: number,
  ) {
    this.decoder = decoderFor(framing, maxMessageBytes);
  }

  /** The framing of the last message read; its reply uses the same (protocol/README.md §2). */
  get framing(): "ndjson" | "lsp" | undefined {
    return this.decoder.framing;
  }

  /** Starts reading; `dispose` stops listening to the input. */
  listen(events: ReaderEvents): { dispose(): void } {
    const emit = (f: Frame): void => events.frame(f);
    const onData = (chunk: Buffer): void => {
      this.batch?.begin();
      try {
        this.decoder.push(chunk, emit);
      } finally {
        this.batch?.end();
      }
    };
    const onEnd = (): void => events.end();
    const onError = (e: Error): void => events.error(e);
    this.input.on("data", onData);
    this.input.on("end", onEnd);
    this.input.on("error", onError);
    // A paused stream (a consumer may have paused stdin) must flow again.
    this.input.resume();
    return {
      dispose: () => {
        this.input.off("data", onData);
        this.input.off("end", onEnd);
        this.input.off("error", onError);
      },
    };
  }

  /** True when the stream ended in the middle of a message. */
  get partial(): boolean {
    return this.decoder.pending;
  }
}

export interface WriterEvents {
  error(e: NodeJS.ErrnoException): void;
  close(): void;
}

/** Writes whole replies in the framing of the input; a reply is never split. */
export class FramedWriter {
  private closed = false;

  constructor(
    private readonly output: Writable,
    events: WriterEvents,
  ) {
    output.on("error", (e: NodeJS.ErrnoException) => {
      this.closed = true;
      events.error(e);
    });
    output.on("close", () => {
      this.closed = true;
      events.close();
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /**
   * One reply (the JSON text of a response or of a batch of them) in the framing of the message it
   * answers; one with an attachment (protocol/README.md §2) is asked for only in LSP framing.
   */
  frame(reply: string | AttachedReply, framing: "ndjson" | "lsp"): string {
    if (typeof reply !== "string") return `Content-Length: ${Buffer.byteLength(reply.json)}\r\nAgui-Text-Length: ${Buffer.byteLength(reply.attachment)}\r\n\r\n${reply.json}${reply.attachment}`;
    return framing === "ndjson" ? reply + "\n" : `Content-Length: ${Buffer.byteLength(reply)}\r\n\r\n${reply}`;
  }

  /** Writes framed replies, whole. The process's stdout is never ended here. */
  write(framed: string): void {
    if (!this.closed) this.output.write(framed);
  }
}
