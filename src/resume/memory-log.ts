import type { Stamped } from "./stamp.js";
import type { Follower, LogStats, RunEnd, RunInfo, RunLog, RunStart } from "./log.js";

export interface LogCaps {
  /** How long a run's log is kept after it ends, in ms. */
  retentionMs: number;
  /** Bytes of events one run may log; past them it is no longer resumable. */
  maxRunBytes: number;
  /** Bytes of events all runs may log; past them the least recently used run is evicted. */
  maxTotalBytes: number;
}

interface Run {
  start: RunStart;
  events: Stamped[];
  bytes: number;
  ended: RunEnd | undefined;
  endedAt: number;
  followers: Set<Follower>;
}

const eventBytes = (e: Stamped): number => e.block.length + e.id.length;

/**
 * The event log in this process (`--store memory`, the default): it serves rejoins to this process
 * only. Expiry is checked when a run is looked up and when one begins, against an injectable clock,
 * so it costs no timer and tests need no wall clock. Runs are kept in the order of their last use,
 * so eviction takes the least recently used first.
 */
export class MemoryLog implements RunLog {
  private readonly runs = new Map<string, Run>();
  private readonly threads = new Map<string, string>();
  private total = 0;
  private evicted = 0;

  constructor(
    private readonly caps: LogCaps,
    private readonly now: () => number = () => performance.now(),
  ) {}

  begin(run: string, start: RunStart): Promise<void> {
    this.sweep();
    this.runs.set(run, { start, events: [], bytes: 0, ended: undefined, endedAt: 0, followers: new Set() });
    this.threads.set(threadKey(start.threadId, start.path), run);
    return Promise.resolve();
  }

  append(run: string, events: readonly Stamped[]): void {
    const r = this.runs.get(run);
    if (!r || r.ended !== undefined || events.length === 0) return;
    this.use(run, r);
    let bytes = 0;
    for (const e of events) bytes += eventBytes(e);
    if (r.bytes + bytes > this.caps.maxRunBytes) return this.drop(run, r, "unresumable");
    for (const e of events) r.events.push(e);
    r.bytes += bytes;
    this.total += bytes;
    for (const f of r.followers) f.events(events);
    // The least recently used runs go first; the one just written is the most recent.
    for (const [other, o] of this.runs) {
      if (this.total <= this.caps.maxTotalBytes || other === run) break;
      this.drop(other, o, "evicted");
    }
  }

  end(run: string, reason: RunEnd): void {
    const r = this.runs.get(run);
    if (!r || r.ended !== undefined) return;
    r.ended = reason;
    r.endedAt = this.now();
    for (const f of r.followers) f.end(reason);
    r.followers.clear();
  }

  find(run: string): Promise<RunInfo | undefined> {
    const r = this.live(run);
    return Promise.resolve(r && { ...r.start, run, events: r.events.length, ended: r.ended });
  }

  idAt(run: string, seq: number): Promise<string | undefined> {
    return Promise.resolve(this.live(run)?.events[seq - 1]?.id);
  }

  latest(threadId: string, path: string): Promise<string | undefined> {
    const run = this.threads.get(threadKey(threadId, path));
    return Promise.resolve(run !== undefined && this.live(run) ? run : undefined);
  }

  follow(run: string, afterSeq: number, follower: Follower): Promise<() => void> {
    const r = this.live(run);
    if (!r) {
      follower.end("evicted");
      return Promise.resolve(() => {});
    }
    this.use(run, r);
    if (afterSeq < r.events.length) follower.events(r.events.slice(afterSeq));
    if (r.ended !== undefined) {
      follower.end(r.ended);
      return Promise.resolve(() => {});
    }
    r.followers.add(follower);
    return Promise.resolve(() => void r.followers.delete(follower));
  }

  readers(run: string): Promise<number> {
    return Promise.resolve(this.runs.get(run)?.followers.size ?? 0);
  }

  stats(): LogStats {
    return { runs: this.runs.size, bytes: this.total, evicted: this.evicted };
  }

  close(): Promise<void> {
    for (const [run, r] of this.runs) this.drop(run, r, "evicted", false);
    return Promise.resolve();
  }

  /** The run unless its retention is over (then it is forgotten). */
  private live(run: string): Run | undefined {
    const r = this.runs.get(run);
    if (r && r.ended !== undefined && this.now() - r.endedAt >= this.caps.retentionMs) {
      this.forget(run, r);
      return undefined;
    }
    return r;
  }

  private sweep(): void {
    for (const [run, r] of this.runs) if (r.ended !== undefined && this.now() - r.endedAt >= this.caps.retentionMs) this.forget(run, r);
  }

  private use(run: string, r: Run): void {
    this.runs.delete(run);
    this.runs.set(run, r);
  }

  private drop(run: string, r: Run, reason: RunEnd, count = true): void {
    if (count && reason === "evicted") this.evicted++;
    for (const f of r.followers) f.end(reason);
    r.followers.clear();
    this.forget(run, r);
  }

  private forget(run: string, r: Run): void {
    this.total -= r.bytes;
    this.runs.delete(run);
    const key = threadKey(r.start.threadId, r.start.path);
    if (this.threads.get(key) === run) this.threads.delete(key);
  }
}

const threadKey = (threadId: string, path: string): string => `${path}\0${threadId}`;
