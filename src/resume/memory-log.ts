import { idOfBlock, type LoggedEvents } from "./logged.js";
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
 * A run's events: the text of its parts one after another, as sealed segments and, after them, the
 * parts since the last seal; and, per event, where in the run it ends. A part is kept as the very
 * string its client was sent (Latin-1 text is one byte a character in V8, as compact as UTF-8 for
 * ASCII), so a retained event costs its characters and one number, and logging it costs no copy on
 * the stream's path (docs/benchmarks.md, B19 and B21).
 */
interface Run {
  start: RunStart;
  segments: string[];
  /** Where in the run each sealed segment starts. */
  starts: number[];
  /** Parts logged since the last seal. */
  open: string[];
  openLength: number;
  /** Per event: where in the run its block ends (UTF-16 code units from the run's start). */
  ends: number[];
  length: number;
  /** The events' UTF-8 bytes, as sent: what the caps and the stats count. */
  bytes: number;
  ended: RunEnd | undefined;
  endedAt: number;
  followers: Set<Follower>;
}

/**
 * Parts are sealed into one segment once this many characters wait, when the run ends, and before a
 * read. Past V8's largest regular object (128 KiB), a segment is made in its large-object space and
 * never copied again by the garbage collector, while the parts it was joined from die young: kept
 * as they came, every part of a long run was copied out of the young generation once or twice
 * (docs/benchmarks.md, B19).
 */
const SEAL_LENGTH = 256 * 1024;

function seal(r: Run): void {
  if (r.open.length === 0) return;
  r.starts.push(r.length - r.openLength);
  r.segments.push(r.open.join(""));
  r.open = [];
  r.openLength = 0;
}

/** The run's text from `from` to `to`. */
function textOf(r: Run, from: number, to: number): string {
  seal(r);
  // The segment holding `from`: the last that starts at or before it.
  let seg = 0;
  for (let lo = 0, hi = r.starts.length - 1; lo <= hi; ) {
    const mid = (lo + hi) >> 1;
    if ((r.starts[mid] as number) <= from) {
      seg = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  let out = "";
  for (; seg < r.segments.length && (r.starts[seg] as number) < to; seg++) {
    const s = r.starts[seg] as number;
    out += (r.segments[seg] as string).slice(Math.max(0, from - s), to - s);
  }
  return out;
}

/** Where the `seq`-th event (1-based) starts in the run. */
const startOf = (r: Run, seq: number): number => (seq <= 1 ? 0 : (r.ends[seq - 2] as number));

/** The events after the `after`-th (0: all). */
function eventsAfter(r: Run, after: number): LoggedEvents {
  const from = startOf(r, after + 1);
  return { text: textOf(r, from, r.length), ends: r.ends.slice(after).map((e) => e - from) };
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
    this.runs.set(run, { start, segments: [], starts: [], open: [], openLength: 0, ends: [], length: 0, bytes: 0, ended: undefined, endedAt: 0, followers: new Set() });
    this.threads.set(threadKey(start.threadId, start.path), run);
    return Promise.resolve();
  }

  append(run: string, events: LoggedEvents): void {
    const r = this.runs.get(run);
    if (!r || r.ended !== undefined || events.ends.length === 0) return;
    this.use(run, r);
    const bytes = Buffer.byteLength(events.text, "utf8");
    if (r.bytes + bytes > this.caps.maxRunBytes) return this.drop(run, r, "unresumable");
    for (const end of events.ends) r.ends.push(r.length + end);
    r.open.push(events.text);
    r.openLength += events.text.length;
    r.length += events.text.length;
    r.bytes += bytes;
    this.total += bytes;
    if (r.openLength >= SEAL_LENGTH) seal(r);
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
    return Promise.resolve(r && { ...r.start, run, events: r.ends.length, ended: r.ended });
  }

  idAt(run: string, seq: number): Promise<string | undefined> {
    const r = this.live(run);
    if (!r || seq < 1 || seq > r.ends.length) return Promise.resolve(undefined);
    return Promise.resolve(idOfBlock(textOf(r, startOf(r, seq), r.ends[seq - 1] as number)));
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
    if (afterSeq < r.ends.length) follower.events(eventsAfter(r, afterSeq));
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
