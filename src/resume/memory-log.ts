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

/**
 * A run's events, packed: sealed segments of UTF-8 (the events' bytes as the client gets them, one
 * after another) and, per event, where it ends in its segment; the blocks since the last seal wait
 * as they came. So a retained event costs its bytes and one number, not an object, a string for its
 * id and a string for its block (often a slice keeping a whole chunk alive, and two bytes a
 * character once one character is past Latin-1): docs/benchmarks.md, B19 and B21.
 */
interface Run {
  start: RunStart;
  segments: Buffer[];
  /** The number of the first event of each sealed segment (0-based). */
  firsts: number[];
  /** Per event: the byte offset of its end in its segment. */
  ends: number[];
  /** Blocks not sealed yet, and their bytes. */
  open: string[];
  openBytes: number;
  /** Events logged so far. */
  count: number;
  bytes: number;
  ended: RunEnd | undefined;
  endedAt: number;
  followers: Set<Follower>;
}

/** Blocks are sealed into a segment once this many bytes wait, when the run ends, and before a read. */
const SEAL_BYTES = 16 * 1024;

function seal(r: Run): void {
  if (r.open.length === 0) return;
  r.firsts.push(r.count - r.open.length);
  r.segments.push(Buffer.from(r.open.join(""), "utf8"));
  r.open = [];
  r.openBytes = 0;
}

/** The events from the `from`-th (0-based) up to, not including, the `to`-th, unpacked. */
function eventsFrom(r: Run, from: number, to = r.count): Stamped[] {
  seal(r);
  const out: Stamped[] = [];
  // The segment holding event `from`: the last whose first event is at or before it.
  let seg = 0;
  for (let lo = 0, hi = r.firsts.length - 1; lo <= hi; ) {
    const mid = (lo + hi) >> 1;
    if ((r.firsts[mid] as number) <= from) {
      seg = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  for (let i = from; i < to; i++) {
    if (seg + 1 < r.firsts.length && (r.firsts[seg + 1] as number) <= i) seg++;
    const start = i === r.firsts[seg] ? 0 : (r.ends[i - 1] as number);
    const block = (r.segments[seg] as Buffer).toString("utf8", start, r.ends[i]);
    // Every logged block starts with its id line (stamp.ts).
    out.push({ id: block.slice(4, block.indexOf("\n")), block });
  }
  return out;
}

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
    this.runs.set(run, { start, segments: [], firsts: [], ends: [], open: [], openBytes: 0, count: 0, bytes: 0, ended: undefined, endedAt: 0, followers: new Set() });
    this.threads.set(threadKey(start.threadId, start.path), run);
    return Promise.resolve();
  }

  append(run: string, events: readonly Stamped[]): void {
    const r = this.runs.get(run);
    if (!r || r.ended !== undefined || events.length === 0) return;
    this.use(run, r);
    let bytes = 0;
    const lengths: number[] = [];
    for (const e of events) {
      const n = Buffer.byteLength(e.block, "utf8");
      lengths.push(n);
      bytes += n;
    }
    if (r.bytes + bytes > this.caps.maxRunBytes) return this.drop(run, r, "unresumable");
    for (let i = 0; i < events.length; i++) {
      r.open.push((events[i] as Stamped).block);
      r.openBytes += lengths[i] as number;
      r.ends.push(r.openBytes);
    }
    r.count += events.length;
    if (r.openBytes >= SEAL_BYTES) seal(r);
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
    seal(r);
    for (const f of r.followers) f.end(reason);
    r.followers.clear();
  }

  find(run: string): Promise<RunInfo | undefined> {
    const r = this.live(run);
    return Promise.resolve(r && { ...r.start, run, events: r.count, ended: r.ended });
  }

  idAt(run: string, seq: number): Promise<string | undefined> {
    const r = this.live(run);
    if (r && seq === 0) return Promise.resolve(r.start.opening);
    if (!r || seq < 1 || seq > r.count) return Promise.resolve(undefined);
    return Promise.resolve(eventsFrom(r, seq - 1, seq)[0]?.id);
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
    if (afterSeq < r.count) follower.events(eventsFrom(r, afterSeq));
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
