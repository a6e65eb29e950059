import { err, ok } from "../core/index.js";
import { invalidParams, resumeUnknown, unknownRead, type CallResult } from "../protocol/errors.js";
import type * as P from "../protocol/types.js";
import { classify, headerMap, refusal, threadIdIn, type RequestHead, type RequestKind } from "../resume/edge.js";
import type { Cursor, Page, RunEnd } from "../resume/log.js";
import { PAGE_BYTES } from "../resume/pages.js";
import type { ResumeOptions } from "../resume/recorder.js";
import { resolve, Replay } from "../resume/rejoin.js";
import { StreamStore } from "../store/stream-store.js";

/** readRejoin's wait: its default, and the most it may ask (protocol/README.md §16). */
export const READ_WAIT_MS = 1000;
export const MAX_READ_WAIT_MS = 30_000;

/** One open read: its place in the run, and at most one page read from the log and not yet handed over. */
interface Read {
  cursor: Cursor;
  replay: Replay;
  /** The page being read from the log, once asked for: asked for again only once the last was handed over (back-pressure). */
  reading: Promise<void> | undefined;
  /** The page read and not yet handed over, with the bytes it holds against the log's cap. */
  ready: { page: Page; bytes: number } | undefined;
  /** Set once the store let the read go (evicted, idle) or it was closed: a waiting readRejoin then answers -32008. */
  gone: "closed" | "evicted" | "idle" | undefined;
  /** The readRejoin waiting for this read, woken by a page, a second readRejoin, or shutdown. */
  wake: (() => void) | undefined;
  /** The connection that opened it, on a shared sidecar (protocol/README.md §2): its end closes the read. */
  readonly owner: object | undefined;
}

/** Resolves when `reading` settles or after a few microtasks, whichever is first: what a store in this process has at hand is there by then. */
async function atHand(reading: Promise<void> | undefined): Promise<void> {
  if (reading === undefined) return;
  let settled = false;
  void reading.then(() => void (settled = true));
  for (let turn = 0; turn < 8 && !settled; turn++) await Promise.resolve();
}

/** The request a rejoinStream names: `request` as received, or the earlier form's members read into one. */
function requestOf(p: P.RejoinStreamParams): { head: RequestHead; kind: RequestKind; threadId: unknown } | { missing: string } {
  if (p.request !== undefined) {
    const head = { method: p.request.method, path: p.request.path, headers: headerMap(p.request.headers as [string, string][]) };
    return { head, kind: classify(head), threadId: p.request.body === undefined ? undefined : threadIdIn(p.request.body) };
  }
  if (p.threadId === undefined) return { missing: "/threadId" };
  if (p.path === undefined) return { missing: "/path" };
  const headers: Record<string, string> = {};
  if (p.authorization !== undefined) headers["authorization"] = p.authorization;
  if (p.cookie !== undefined) headers["cookie"] = p.cookie;
  if (p.lastEventId !== undefined) headers["last-event-id"] = p.lastEventId;
  const path = p.lastEventId !== undefined ? p.path : `${p.path === "/" ? "" : p.path}/connect`;
  return { head: { method: "POST", path, headers }, kind: p.lastEventId !== undefined ? "rejoin" : "reload", threadId: p.threadId };
}

/**
 * The rejoin side of the stream methods (protocol/README.md §16): rejoinStream decides, by the rules
 * the proxy uses (resume/edge.ts, resume/rejoin.ts), what a request the middleware received is
 * given; readRejoin hands the middleware the next page of the run, read from the log only once the
 * last was taken, so a client that reads slowly holds one page here. Reads are held to maxStreams
 * and streamIdleMs, as streams are, with ids `r1`, `r2`, ... of their own.
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

  /**
   * Params that cannot be served are answered at once, in order with the calls around them, as every
   * other method's are (the fuzzer's invariant); only a lookup in the log answers later.
   */
  rejoinStream(p: P.RejoinStreamParams, owner?: object): CallResult<P.RejoinStreamResult> | Promise<CallResult<P.RejoinStreamResult>> {
    const asked = requestOf(p);
    if ("missing" in asked) return err(invalidParams(asked.missing, "MISSING", `${asked.missing.slice(1)}: required without request`));
    if (p.request !== undefined && (p.threadId ?? p.path ?? p.authorization ?? p.cookie ?? p.lastEventId) !== undefined) return err(invalidParams("/request", "CONFLICTING_PARAMS", "request: give the request alone, or the earlier members (threadId, path, ...) without it"));
    const { head, kind, threadId } = asked;
    if (kind === "forward") return err(invalidParams("/request", "INVALID_VALUE", "request: neither a rejoin (a POST with Last-Event-ID) nor a reload (a POST to <agent path>/connect); it is the app's (classifyRequest)"));
    const opts = this.resume;
    if (!opts) return err(resumeUnknown(refusal(kind)));
    return this.openRead(opts, kind, head, threadId, owner);
  }

  private async openRead(opts: ResumeOptions, kind: "rejoin" | "reload", head: RequestHead, threadId: unknown, owner: object | undefined): Promise<CallResult<P.RejoinStreamResult>> {
    const found = await resolve(opts, kind, head, threadId);
    if (found.refused) return err(resumeUnknown(found.refused));
    const cursor = await opts.log.open(found.info.run, found.after);
    const read: Read = { cursor, replay: new Replay(found.prelude), reading: undefined, ready: undefined, gone: undefined, wake: undefined, owner };
    const readId = this.reads.add(read, this.now());
    return ok({ readId, status: found.info.status, headers: found.info.headers });
  }

  readRejoin(p: P.ReadRejoinParams): CallResult<P.ReadRejoinResult> | Promise<CallResult<P.ReadRejoinResult>> {
    const found = this.reads.get(p.readId, this.now());
    if (!found.ok) return err(unknownRead(p.readId, found.error));
    const read = found.value;
    // One readRejoin waits at a time: an earlier one answers now, with what there is.
    read.wake?.();
    this.ask(read);
    const waitMs = p.waitMs ?? READ_WAIT_MS;
    if (read.ready !== undefined) return this.take(p.readId, read);
    // 0 answers with what the log has at hand: a page the store holds in this process arrives within a few
    // microtasks (no timer, so it holds under fake timers too); one that must come from elsewhere waits for the next call.
    if (waitMs === 0) return atHand(read.reading).then(() => (read.gone !== undefined ? err(unknownRead(p.readId, read.gone)) : this.take(p.readId, read)));
    return new Promise((done) => {
      const answer = () => {
        clearTimeout(timer);
        if (read.wake === answer) read.wake = undefined;
        done(read.gone !== undefined ? err(unknownRead(p.readId, read.gone)) : this.take(p.readId, read));
      };
      const timer = setTimeout(answer, waitMs);
      read.wake = answer;
    });
  }

  closeRejoin(p: P.CloseRejoinParams): CallResult<P.CloseRejoinResult> {
    const found = this.reads.close(p.readId, this.now());
    if (!found.ok) return err(unknownRead(p.readId, found.error));
    this.let(found.value, "closed");
    return ok({ closed: true });
  }

  /** Every waiting readRejoin (of `owner`'s, when given) answers now, with what there is: the transport is shutting down. */
  wakeAll(owner?: object): void {
    // Each wake takes itself out of its read: collect first.
    const wakes: (() => void)[] = [];
    this.reads.bytes((read) => {
      if (read.wake && (owner === undefined || read.owner === owner)) wakes.push(read.wake);
      return 0;
    });
    for (const w of wakes) w();
  }

  /** The reads a connection opened stop following their runs: the connection is gone (§2). */
  release(owner: object): void {
    for (const read of this.reads.closeWhere((r) => r.owner === owner)) this.let(read, "closed");
  }

  /** Every read stops following its run: the process is ending. */
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

  /** Asks the log for the next page, unless one is on its way or waiting to be handed over. */
  private ask(read: Read): void {
    if (read.reading !== undefined || read.ready !== undefined || read.gone !== undefined) return;
    read.reading = read.cursor.read(PAGE_BYTES).then((page) => {
      read.reading = undefined;
      if (read.gone !== undefined) return;
      const bytes = page.events === undefined ? 0 : Buffer.byteLength(page.events.text, "utf8");
      this.resume?.log.hold(bytes);
      read.ready = { page, bytes };
      read.wake?.();
    });
  }

  /** What a read's call returns: the page read, if any; with the run's end, done (the read is then closed). */
  private take(readId: string, read: Read): CallResult<P.ReadRejoinResult> {
    const ready = read.ready;
    if (ready === undefined) return ok({ text: "", done: false });
    read.ready = undefined;
    this.resume?.log.hold(-ready.bytes);
    if (ready.page.events !== undefined) {
      const text = read.replay.text(ready.page.events);
      // The next page is read now, while the middleware writes this one: it is handed over only when asked for.
      this.ask(read);
      return ok({ text, done: false });
    }
    const end: RunEnd = ready.page.end;
    this.reads.close(readId, this.now());
    this.let(read, "closed");
    return ok({ text: "", done: true, end });
  }

  /** The read is let go: its cursor closes (so it no longer counts as the run's reader), its page is released, and a waiting call answers. */
  private let(read: Read, why: "closed" | "evicted" | "idle"): void {
    read.gone ??= why;
    read.cursor.close();
    if (read.ready !== undefined) this.resume?.log.hold(-read.ready.bytes);
    read.ready = undefined;
    read.wake?.();
  }
}
