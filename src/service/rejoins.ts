import { err, ok } from "../core/index.js";
import { resumeUnknown, unknownRead, type CallResult } from "../protocol/errors.js";
import type * as P from "../protocol/types.js";
import type { RunEnd } from "../resume/log.js";
import type { ResumeOptions } from "../resume/recorder.js";
import { findConnect, findRejoin, Replay } from "../resume/rejoin.js";
import { StreamStore } from "../store/stream-store.js";

/** readRejoin's wait: its default, and the most it may ask (protocol/README.md §16). */
export const READ_WAIT_MS = 1000;
export const MAX_READ_WAIT_MS = 30_000;

/** One open read: the text the log has handed over and nobody has read yet, and how the run ended, once it did. */
interface Read {
  text: string;
  end: RunEnd | undefined;
  /** Set once the store let the read go (evicted, idle) or it was closed: a waiting readRejoin then answers -32008. */
  gone: "closed" | "evicted" | "idle" | undefined;
  /** The readRejoin waiting for this read, woken by an event, the end, a second readRejoin, or shutdown. */
  wake: (() => void) | undefined;
  unfollow: (() => void) | undefined;
}

/**
 * The rejoin side of the stream methods (protocol/README.md §16): rejoinStream finds the run a
 * dropped stream or a reloaded page asks for, by the rules the proxy uses (resume/rejoin.ts), and
 * follows it in the run log; readRejoin hands the middleware what came since its last call, waiting
 * for the next event when nothing did. Reads are held to maxStreams and streamIdleMs, as streams are,
 * with ids `r1`, `r2`, ... of their own.
 */
export class Rejoins {
  private readonly reads: StreamStore<Read>;

  constructor(
    private readonly resume: ResumeOptions | undefined,
    limits: { maxStreams: number; idleMs: number },
    private readonly now: () => number,
  ) {
    this.reads = new StreamStore({ ...limits, prefix: "r" });
    this.reads.dropped = (read, reason) => this.let(read, reason);
  }

  async rejoinStream(p: P.RejoinStreamParams): Promise<CallResult<P.RejoinStreamResult>> {
    const refused = resumeUnknown(p.lastEventId === undefined ? 204 : 410);
    const opts = this.resume;
    if (!opts) return err(refused);
    const asker = { threadId: p.threadId, path: p.path, presented: { authorization: p.authorization, cookie: p.cookie } };
    let info, after, prelude: readonly string[];
    if (p.lastEventId !== undefined) {
      const found = await findRejoin(opts.log, opts.key, p.lastEventId, asker);
      if (!found) return err(refused);
      ({ info, after } = found);
      prelude = [];
    } else {
      info = await findConnect(opts.log, opts.key, asker);
      if (!info) return err(refused);
      after = 0;
      prelude = info.prelude;
    }
    const read: Read = { text: "", end: undefined, gone: undefined, wake: undefined, unfollow: undefined };
    const readId = this.reads.add(read, this.now());
    const replay = new Replay(prelude);
    const unfollow = await opts.log.follow(info.run, after, {
      events: (events) => {
        read.text += replay.text(events);
        read.wake?.();
      },
      end: (reason) => {
        read.end ??= reason;
        read.wake?.();
      },
    });
    // Closed or evicted while the log was being asked: nothing follows it any more.
    if (read.gone !== undefined) unfollow();
    else read.unfollow = unfollow;
    return ok({ readId, status: info.status, headers: info.headers });
  }

  readRejoin(p: P.ReadRejoinParams): CallResult<P.ReadRejoinResult> | Promise<CallResult<P.ReadRejoinResult>> {
    const found = this.reads.get(p.readId, this.now());
    if (!found.ok) return err(unknownRead(p.readId, found.error));
    const read = found.value;
    // One readRejoin waits at a time: an earlier one answers now, with what there is.
    read.wake?.();
    const waitMs = p.waitMs ?? READ_WAIT_MS;
    if (read.text !== "" || read.end !== undefined || waitMs === 0) return this.take(p.readId, read);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (read.wake === done) read.wake = undefined;
        resolve(read.gone !== undefined ? err(unknownRead(p.readId, read.gone)) : this.take(p.readId, read));
      };
      const timer = setTimeout(done, waitMs);
      read.wake = done;
    });
  }

  closeRejoin(p: P.CloseRejoinParams): CallResult<P.CloseRejoinResult> {
    const found = this.reads.close(p.readId, this.now());
    if (!found.ok) return err(unknownRead(p.readId, found.error));
    this.let(found.value, "closed");
    return ok({ closed: true });
  }

  /** Every waiting readRejoin answers now, with what there is: the transport is shutting down. */
  wakeAll(): void {
    // Each wake takes itself out of its read: collect first.
    const wakes: (() => void)[] = [];
    this.reads.bytes((read) => {
      if (read.wake) wakes.push(read.wake);
      return 0;
    });
    for (const w of wakes) w();
  }

  /** Every read stops following its run (on Redis, each holds a connection of its own): the process is ending. */
  closeAll(): void {
    const all: Read[] = [];
    this.reads.bytes((read) => {
      all.push(read);
      return 0;
    });
    for (const read of all) this.let(read, "closed");
  }

  /** Open reads (stats), idle ones closed first. */
  get open(): number {
    this.reads.sweep(this.now());
    return this.reads.size;
  }

  /** What a read's call returns: the text so far, and the end once the run ended (the read is then closed). */
  private take(readId: string, read: Read): CallResult<P.ReadRejoinResult> {
    const text = read.text;
    read.text = "";
    if (read.end === undefined) return ok({ text, done: false });
    this.reads.close(readId, this.now());
    this.let(read, "closed");
    return ok({ text, done: true, end: read.end });
  }

  /** The read is let go: it stops following the run (so it no longer counts as its reader), and a waiting call answers. */
  private let(read: Read, why: "closed" | "evicted" | "idle"): void {
    read.gone ??= why;
    read.unfollow?.();
    read.unfollow = undefined;
    read.wake?.();
  }
}
