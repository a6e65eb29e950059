import type { Readable, Writable } from "node:stream";
import type { Log } from "../log.js";
import type { StateService } from "../service/state-service.js";
import { Dispatcher } from "./dispatch.js";
import type { Frame } from "./framing.js";
import { FramedReader, FramedWriter, type Framing } from "./stdio.js";

export interface ServeOptions {
  input: Readable;
  output: Writable;
  framing: Framing;
  service: StateService;
  log: Log;
}

/** Why serving ended: input ended, stop() was called, or the output was closed. */
export type Ending = "end" | "stopped" | "output-closed";

export interface Server {
  /** Resolves once input has ended or stop() was called, every reply written, or output closed. */
  readonly done: Promise<Ending>;
  /** Stops reading; what was read has already been answered. */
  stop(): void;
}

/**
 * Wires a byte stream to the dispatcher. Each frame is handled as it arrives
 * and its reply written before the next frame is read, so "answered" and
 * "read" never drift apart: when input ends or stop() is called, nothing is
 * left in flight.
 */
export function serve(opts: ServeOptions): Server {
  const dispatcher = new Dispatcher(opts.service, opts.log);
  const reader = new FramedReader(opts.input, opts.framing, opts.service.limits.maxMessageBytes);
  const writer = new FramedWriter(opts.output, () => reader.framing ?? "ndjson");
  let finish: (why: Ending) => void = () => undefined;
  const done = new Promise<Ending>((resolve) => (finish = resolve));

  // The replies to the messages of one chunk leave in one write (writev):
  // with many requests in flight, that is one system call instead of dozens.
  reader.batch = { begin: () => opts.output.cork(), end: () => opts.output.uncork() };
  const subscription = reader.listen(((frame: Frame) => {
    const reply = dispatcher.handle(frame);
    if (reply !== undefined) writer.writeText(reply);
  }) as never);

  const settle = (why: Ending): void => {
    subscription.dispose();
    if (why === "output-closed") {
      finish(why);
      return;
    }
    // Resolve once everything written so far has been handed to the OS.
    if (opts.output.writableLength === 0 || writer.isClosed) finish(why);
    else opts.output.once("drain", () => finish(why));
  };

  reader.onClose(() => {
    if (reader.partial) opts.log.warn("input ended in the middle of a message; it was dropped");
    settle("end");
  });
  reader.onError((e) => opts.log.error({ err: e }, "input error"));
  writer.onError(([e]) => {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== "EPIPE") opts.log.error({ err: e }, "output error");
    settle("output-closed");
  });
  writer.onClose(() => settle("output-closed"));

  return {
    done,
    stop: () => {
      opts.input.pause();
      settle("stopped");
    },
  };
}
