import { idOfBlock, type LoggedEvents } from "./logged.js";
import type { Cursor, LogStats, Page, RunEnd, RunInfo, RunLog, RunStart } from "./log.js";
import { PackedEvents } from "./packed.js";

/** `--max-runs`'s default: runs kept in the process, live and ended (protocol/README.md §16, caps). */
export const DEFAULT_MAX_RUNS = 10_000;

export interface LogCaps {
  /** How long a run's log is kept after it ends, in ms. */
  retentionMs: number;
  /** Bytes one run may keep (its start, prelude included, and its events); past them it is no longer resumable. */
  maxRunBytes: number;
  /** Bytes all runs may keep, with the pages readers hold (RunLog.hold); past them the least recently used run is evicted. */
  maxTotalBytes: number;
  /** Runs kept, live and ended; past it the least recently used run is evicted. DEFAULT_MAX_RUNS when left out. */
  maxRuns?: number;
}

/**
 * What a run's start keeps, in bytes: the prelude (a reload's snapshots of the request's state and
 * messages, often the largest thing a run keeps) and the rest of what is sent again to a rejoin
 * (headers, ids). Counted against both caps as the run's events are (protocol/README.md §16, caps).
 */
export function startBytes(start: RunStart): number {
  let n = Buffer.byteLength(start.threadId) + Buffer.byteLength(start.path) + Buffer.byteLength(start.credential) + Buffer.byteLength(start.opening);
  for (const block of start.prelude) n += Buffer.byteLength(block);
  for (const [name, value] of Object.entries(start.headers)) n += Buffer.byteLength(name) + Buffer.byteLength(value);
  return n;
}

interface Run {
  readonly id: string;
  readonly start: RunStart;
  readonly startBytes: number;
  events: PackedEvents;
  ended: RunEnd | undefined;
  endedAt: number;
  /** Why the log let it go (evicted, expired, over its cap), once it did: its cursors end so. */
  gone: RunEnd | undefined;
  /** Its open cursors: its readers. */
  readonly cursors: Set<MemoryCursor>;
}

const cost = (r: Run): number => r.startBytes + r.events.bytes;

/** A reader's place in a run of this process: pages come straight from the packed events. */
class MemoryCursor implements Cursor {
  private waiting: { maxBytes: number; resolve: (p: Page) => void } | undefined;
  private closed = false;

  constructor(
    private readonly r: Run | undefined,
    /** Events read so far (the cursor reads from the next). */
    private seq: number,
    /** Expires what is due, then marks the run used (LRU): at each read. */
    private readonly touch: (r: Run) => void,
  ) {}

  read(maxBytes: number): Promise<Page> {
    if (this.waiting) return Promise.reject(new Error("a cursor reads one page at a time: this read came before the last one resolved"));
    if (!this.closed && this.r && this.r.gone === undefined) this.touch(this.r);
    const page = this.page(maxBytes);
    if (page) return Promise.resolve(page);
    return new Promise((resolve) => (this.waiting = { maxBytes, resolve }));
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.r?.cursors.delete(this);
    this.wake();
  }

  /** Something changed (an append, the end, the run let go, the cursor closed): a waiting read answers if it now can. */
  wake(): void {
    const w = this.waiting;
    if (!w) return;
    const page = this.page(w.maxBytes);
    if (!page) return;
    this.waiting = undefined;
    w.resolve(page);
  }

  /** The page to answer with now, or undefined when the run is live and every event was read. */
  private page(maxBytes: number): Page | undefined {
    if (this.closed) return { end: "cancelled" };
    const r = this.r;
    if (!r) return { end: "evicted" };
    if (r.gone !== undefined) return { end: r.gone };
    if (this.seq < r.events.count) {
      const to = r.events.pageEnd(this.seq, maxBytes);
      const events = r.events.slice(this.seq, to);
      this.seq = to;
      return { events };
    }
    return r.ended === undefined ? undefined : { end: r.ended };
  }
}

/**
 * The event log in this process (`--store memory`, the default): it serves rejoins to this process
 * only. Its caps hold (protocol/README.md §16, caps): every byte it keeps for a run, the start with
 * its prelude and the events, counts against `maxRunBytes` and `maxTotalBytes`, and so do the pages
 * readers hold (`hold`); the number of runs is held to `maxRuns`. Past either total, the least
 * recently used runs are evicted first, whether or not they have events: `runs` is kept in the order
 * of last use (begin, append, open, read).
 *
 * Expiry costs a clock read and the runs that expired, never a look at every run: with one retention
 * for all, the runs that ended expire in the order they ended, so `ended` (kept in that order) is
 * expired from its head, when a run begins or is looked up. No timer; the clock is injectable, so
 * tests need no wall clock.
 *
 * A run whose start alone is past `maxRunBytes` (or `maxTotalBytes`) is not filed at all: find()
 * gives undefined for it, which a rejoin answers as it answers an unresumable run with nothing to
 * read (410), and its thread has no latest run for a reload (the thread's earlier run is not one to
 * reload any more).
 */
export class MemoryLog implements RunLog {
  /** Every run kept, least recently used first. */
  private readonly runs = new Map<string, Run>();
  /** The runs that ended, in the order they ended: the order they expire in. */
  private readonly ended = new Map<string, Run>();
  private readonly threads = new Map<string, string>();
  private readonly maxRuns: number;
  /** Bytes kept: every run's cost, and what readers hold. */
  private total = 0;
  private evicted = 0;
  private readonly touch = (r: Run): void => {
    this.expire();
    if (r.gone === undefined) this.use(r);
  };

  constructor(
    private readonly caps: LogCaps,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.maxRuns = caps.maxRuns ?? DEFAULT_MAX_RUNS;
  }

  begin(run: string, start: RunStart): Promise<void> {
    this.expire();
    const old = this.runs.get(run);
    if (old) this.drop(old, "evicted");
    const bytes = startBytes(start);
    const key = start.threadId === "" ? undefined : threadKey(start.threadId, start.path);
    if (bytes > Math.min(this.caps.maxRunBytes, this.caps.maxTotalBytes)) {
      if (key !== undefined) this.threads.delete(key);
      return Promise.resolve();
    }
    const r: Run = { id: run, start, startBytes: bytes, events: new PackedEvents(), ended: undefined, endedAt: 0, gone: undefined, cursors: new Set() };
    this.runs.set(run, r);
    this.total += bytes;
    // §16: a run without a threadId is never reloaded, so it is never a thread's latest.
    if (key !== undefined) this.threads.set(key, run);
    this.evictOver(r);
    return Promise.resolve();
  }

  append(run: string, events: LoggedEvents): void {
    const r = this.runs.get(run);
    const last = events.ends[events.ends.length - 1];
    if (!r || r.ended !== undefined || last === undefined) return;
    this.use(r);
    // Whole events only: anything after the last one's end is no event.
    const text = last < events.text.length ? events.text.slice(0, last) : events.text;
    const bytes = Buffer.byteLength(text, "utf8");
    if (cost(r) + bytes > Math.min(this.caps.maxRunBytes, this.caps.maxTotalBytes)) return this.drop(r, "unresumable");
    r.events.add(text, events.ends, bytes);
    this.total += bytes;
    for (const c of r.cursors) c.wake();
    this.evictOver(r);
  }

  end(run: string, reason: RunEnd): void {
    const r = this.runs.get(run);
    if (!r || r.ended !== undefined) return;
    r.ended = reason;
    r.endedAt = this.now();
    r.events.finish();
    this.ended.set(run, r);
    for (const c of r.cursors) c.wake();
  }

  find(run: string): Promise<RunInfo | undefined> {
    const r = this.live(run);
    return Promise.resolve(r && { ...r.start, run, events: r.events.count, ended: r.ended });
  }

  idAt(run: string, seq: number): Promise<string | undefined> {
    const r = this.live(run);
    if (r && seq === 0) return Promise.resolve(r.start.opening);
    if (!r || seq < 1 || seq > r.events.count) return Promise.resolve(undefined);
    return Promise.resolve(idOfBlock(r.events.slice(seq - 1, seq).text));
  }

  latest(threadId: string, path: string): Promise<string | undefined> {
    this.expire();
    const run = this.threads.get(threadKey(threadId, path));
    return Promise.resolve(run !== undefined && this.runs.has(run) ? run : undefined);
  }

  open(run: string, afterSeq: number): Promise<Cursor> {
    const r = this.live(run);
    const cursor = new MemoryCursor(r, Math.max(0, afterSeq), this.touch);
    if (r) {
      this.use(r);
      r.cursors.add(cursor);
    }
    return Promise.resolve(cursor);
  }

  readers(run: string): Promise<number> {
    return Promise.resolve(this.runs.get(run)?.cursors.size ?? 0);
  }

  hold(bytes: number): void {
    this.total += bytes;
    if (bytes > 0) this.evictOver(undefined);
  }

  shed(bytes: number): string[] {
    const before = this.total;
    // What expired is freed first, and costs no one a resume.
    this.expire();
    const out: string[] = [];
    for (const r of this.runs.values()) {
      // As the heap ceiling's other stores do (heap-ceiling.ts, Sheddable): the most recent is kept.
      if (before - this.total >= bytes || this.runs.size <= 1) break;
      this.evict(r);
      out.push(r.id);
    }
    return out;
  }

  stats(): LogStats {
    this.expire();
    return { runs: this.runs.size, bytes: this.total, evicted: this.evicted };
  }

  close(): Promise<void> {
    for (const r of this.runs.values()) this.drop(r, "evicted");
    return Promise.resolve();
  }

  /** The run, if it is kept (after expiring what is due). */
  private live(run: string): Run | undefined {
    this.expire();
    return this.runs.get(run);
  }

  /** Forgets the runs whose retention is over: from the head of `ended`, so only those are looked at, and one more. */
  private expire(): void {
    if (this.ended.size === 0) return;
    const t = this.now();
    for (const r of this.ended.values()) {
      if (t - r.endedAt < this.caps.retentionMs) break;
      this.drop(r, "evicted");
    }
  }

  /** Past either total, evicts the least recently used runs, `keep` (the run just begun or written) never. */
  private evictOver(keep: Run | undefined): void {
    if (this.total <= this.caps.maxTotalBytes && this.runs.size <= this.maxRuns) return;
    this.expire();
    for (const r of this.runs.values()) {
      if (this.total <= this.caps.maxTotalBytes && this.runs.size <= this.maxRuns) break;
      if (r !== keep) this.evict(r);
    }
  }

  private use(r: Run): void {
    this.runs.delete(r.id);
    this.runs.set(r.id, r);
  }

  /** Lets a run go to free room (the caps, the heap ceiling): counted in stats().evicted, as expiry is not. */
  private evict(r: Run): void {
    this.evicted++;
    this.drop(r, "evicted");
  }

  /** Lets the run go: its bytes freed at once (a cursor still holding it holds nothing), its readers ended with `reason`. */
  private drop(r: Run, reason: RunEnd): void {
    r.gone = reason;
    this.total -= cost(r);
    r.events = new PackedEvents();
    this.runs.delete(r.id);
    this.ended.delete(r.id);
    const key = threadKey(r.start.threadId, r.start.path);
    if (this.threads.get(key) === r.id) this.threads.delete(key);
    for (const c of r.cursors) c.wake();
    r.cursors.clear();
  }
}

const threadKey = (threadId: string, path: string): string => `${path}\0${threadId}`;
