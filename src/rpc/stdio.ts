import type { Readable, Writable } from "node:stream";
import { AbstractMessageReader, AbstractMessageWriter, type DataCallback, type Disposable, type Message } from "vscode-jsonrpc";
import { detectFraming, LspDecoder, NdjsonDecoder, type Frame, type FrameDecoder } from "./framing.js";

export type Framing = "auto" | "ndjson" | "lsp";

/**
 * Reads frames from a byte stream in either framing. It hands on frames, not
 * parsed messages: a JSON-RPC batch is an array, which vscode-jsonrpc's
 * Message type cannot express, and a parse error must still be answered.
 */
export class FramedReader extends AbstractMessageReader {
  private decoder: FrameDecoder | undefined;
  /** The framing in use, once known; replies use the same (protocol/README.md §2). */
  framing: "ndjson" | "lsp" | undefined;
  /** Called around the frames of each chunk read, so their replies can leave in one write. */
  batch: { begin(): void; end(): void } | undefined;

  constructor(
    private readonly input: Readable,
    framing: Framing,
    private readonly maxMessageBytes: number,
  ) {
    super();
    if (framing !== "auto") this.choose(framing);
  }

  private choose(framing: "ndjson" | "lsp"): void {
    this.framing = framing;
    this.decoder = framing === "ndjson" ? new NdjsonDecoder(this.maxMessageBytes) : new LspDecoder(this.maxMessageBytes);
  }

  /** Delivers each Frame to `callback` (typed as vscode-jsonrpc's DataCallback). */
  listen(callback: DataCallback): Disposable {
    const emit = callback as unknown as (f: Frame) => void;
    const onData = (chunk: Buffer): void => {
      if (!this.decoder) {
        // Auto mode: the first non-whitespace byte decides. The chunk is then
        // decoded whole, so nothing needs pushing back onto the stream.
        const kind = detectFraming(chunk);
        if (!kind) return;
        this.choose(kind);
      }
      this.batch?.begin();
      try {
        (this.decoder as FrameDecoder).push(chunk, emit);
      } finally {
        this.batch?.end();
      }
    };
    const onEnd = (): void => this.fireClose();
    const onError = (e: Error): void => this.fireError(e);
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
    return this.decoder?.pending ?? false;
  }
}

/** Writes whole replies in the framing of the input; a reply is never split. */
export class FramedWriter extends AbstractMessageWriter {
  private closed = false;

  constructor(
    private readonly output: Writable,
    private readonly framing: () => "ndjson" | "lsp",
  ) {
    super();
    output.on("error", (e: NodeJS.ErrnoException) => {
      this.closed = true;
      this.fireError(e);
    });
    output.on("close", () => {
      this.closed = true;
      this.fireClose();
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  write(msg: Message): Promise<void> {
    this.writeText(JSON.stringify(msg));
    return Promise.resolve();
  }

  writeText(json: string): void {
    if (this.closed) return;
    if (this.framing() === "ndjson") this.output.write(json + "\n");
    else this.output.write(`Content-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`);
  }

  end(): void {
    // The process's stdout is not ours to end; tests pass their own streams.
  }
}
