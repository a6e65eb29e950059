import type { Readable, Writable } from "node:stream";
import type { Log } from "../../log.js";
import type { StateService } from "../../service/state-service.js";
import type { StreamService } from "../../service/stream-service.js";
import { AttachedReply, Dispatcher } from "../common/dispatch.js";
import type { Frame } from "../common/frame.js";
import { FramedReader, FramedWriter, type Framing as FramingFlag } from "./stdio.js";

type Framing = "ndjson" | "lsp";

export interface ServerOptions {
  input: Readable;
  output: Writable;
  framing: FramingFlag;
  /** The service to serve. Its limits (protocol/README.md §7) are the server's too. */
  service: StateService;
  /** The stream methods' service (protocol/README.md §14). */
  streams: StreamService;
  log: Log;
  /** Called after the messages of each chunk of input are answered, between calls (the heap ceiling's check). */
  afterChunk?: () => void;
  /** Called with the characters of each message (its attachment with it) as it comes: the heap's tuning. */
  onMessage?: (chars: number) => void;
  /**
   * The connection, on a shared sidecar (protocol/README.md §2): the streams and reads it opens are
   * its own, and at its end only its own waiting reads are woken. Left out (stdio), the process is
   * the connection.
   */
  owner?: object;
}

/** Why serving ended: input ended, stop() was called, or the output was closed. */
export type Ending = "end" | "stopped" | "output-closed";

export interface Server {
  /** Resolves once input has ended or stop() was called, every reply written, or output closed. */
  readonly done: Promise<Ending>;
  /** Requests with an id received so far. */
  readonly requests: number;
  /** Stops reading; what was read has already been answered. */
  stop(): void;
}

/**
 * Serves a service over a byte stream: frames in, dispatcher, replies out.
 * Each frame is handled as it arrives and its reply written before the next
 * frame is read, so "answered" and "read" never drift apart. A method that
 * answers later (readRejoin, rejoinStream: protocol/README.md §16) has its
 * reply written when it settles, while the next frames are read and answered;
 * when input ends or stop() is called, the waiting reads are woken to answer
 * with what they have, and serving ends once every reply is written.
 */
export function startServer(opts: ServerOptions): Server {
  const { maxMessageBytes, maxDepth } = opts.service.limits;
  const dispatcher = new Dispatcher(opts.service, opts.streams, { maxMessageBytes, maxDepth }, opts.log, opts.owner);
  const reader = new FramedReader(opts.input, opts.framing, maxMessageBytes);
  let finish: (why: Ending) => void = () => undefined;
  const done = new Promise<Ending>((resolve) => (finish = resolve));

  // Replies still to come from methods that answer later, and the ending that waits for them.
  let later = 0;
  let ending: Ending | undefined;
  const settle = (why: Ending): void => {
    if (why !== "output-closed" && later > 0) {
      ending ??= why;
      subscription.dispose();
      opts.streams.wake(opts.owner);
      return;
    }
    subscription.dispose();
    if (why === "output-closed") {
      finish(why);
      return;
    }
    // Resolve once everything written so far has been handed to the OS.
    if (opts.output.writableLength === 0 || writer.isClosed) finish(why);
    else opts.output.once("drain", () => finish(why));
  };

  const writer = new FramedWriter(opts.output, {
    error: (e) => {
      if (e.code !== "EPIPE" && e.code !== "ECONNRESET") opts.log.error({ err: e }, "output error");
      settle("output-closed");
    },
    close: () => settle("output-closed"),
  });

  // The replies to the messages of one chunk leave in one write: with many
  // requests in flight, that is one system call instead of dozens. Joined
  // here rather than corked: cork() then uncork() takes the stream's writev
  // path, which costs a buffer and a request object per reply even when
  // there is just one.
  let pending: string[] | undefined;
  reader.batch = {
    begin: () => (pending = []),
    end: () => {
      const replies = pending;
      pending = undefined;
      if (replies && replies.length > 0) writer.write(replies.length === 1 ? (replies[0] as string) : replies.join(""));
      opts.afterChunk?.();
    },
  };
  // The first openStream starts loading the stream pipeline, which settles
  // asynchronously (src/cli/stream-pipeline.ts). Until it does, the frames
  // read after that message are held, in order, and input is paused: a part
  // sent right behind its openStream, in the same read, is answered once the
  // pipeline is there, as if it had come later (protocol/README.md §14).
  // Each frame is held with the framing its reply takes (under `auto`, that
  // of the last message read up to it), since reading goes on meanwhile.
  let held: [Frame, Framing][] | undefined;
  let endedWhileHeld = false;
  const deliver = (frame: Frame, framing: Framing = reader.framing ?? "ndjson"): void => {
    if (held) {
      held.push([frame, framing]);
      return;
    }
    if (frame.kind === "text") opts.onMessage?.(frame.text.length + (frame.attachment?.length ?? 0));
    const reply = dispatcher.handle(frame);
    if (typeof reply === "string" || reply instanceof AttachedReply) {
      const framed = writer.frame(reply, framing);
      if (pending) pending.push(framed);
      else writer.write(framed);
    } else if (reply !== undefined) answerLater(reply, framing);
    const loading = opts.streams.loading();
    if (loading) holdUntil(loading);
  };
  const answerLater = (reply: Promise<string | undefined>, framing: Framing): void => {
    later++;
    void reply
      .then(
        // The chunk it came in was written long ago: this reply leaves on its own.
        (text) => void (text !== undefined && writer.write(writer.frame(text, framing))),
        (e: unknown) => opts.log.error({ err: e }, "internal error: a reply that answers later failed to encode"),
      )
      .finally(() => {
        if (--later === 0 && ending !== undefined) settle(ending);
      });
  };
  const holdUntil = (loading: Promise<void>): void => {
    held = [];
    opts.input.pause();
    void loading.then(() => {
      const frames = held ?? [];
      held = undefined;
      reader.batch?.begin();
      try {
        for (const [f, framing] of frames) deliver(f, framing);
      } finally {
        reader.batch?.end();
      }
      if (held) return; // a failed load was tried again by a held openStream: still holding
      if (endedWhileHeld) ended();
      else opts.input.resume();
    });
  };
  const ended = (): void => {
    if (held) {
      endedWhileHeld = true;
      return;
    }
    if (reader.partial) opts.log.warn("input ended in the middle of a message; it was dropped");
    settle("end");
  };
  const subscription = reader.listen({
    frame: (f) => deliver(f),
    end: ended,
    // A peer that resets its connection (a worker killed) is a connection's ordinary end, not an error of ours.
    error: (e: NodeJS.ErrnoException) => (e.code === "ECONNRESET" ? opts.log.debug({ err: e }, "connection reset") : opts.log.error({ err: e }, "input error")),
  });

  return {
    done,
    get requests() {
      return dispatcher.requests;
    },
    stop: () => {
      opts.input.pause();
      settle("stopped");
    },
  };
}
