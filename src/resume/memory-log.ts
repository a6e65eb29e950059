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
 * A run's events, packed: sealed segments of UTF-8 (the events' bytes as the client got them, one
 * after another) and, after them, the parts logged since the last seal, kept as the very strings the
 * client was sent; and, per event, the byte offset in the run where it ends. So logging a part costs
 * no copy on the stream's path, and a retained event costs its UTF-8 bytes and one number: a string
 * holding one character past Latin-1 (a typographic quote in a model's answer) takes two bytes for
 * every character, and kept as strings, B21's token runs took 2.12× their bytes
 * (docs/benchmarks.md, B19 and B21).
 */
interface Run {
  start: RunStart;
  segments: Buffer[];
  /** The byte offset in the run where each sealed segment starts. */
  starts: number[];
  /** Parts logged since the last seal, and their bytes. */
  open: string[];
  openBytes: number;
  /** Per event: the byte offset in the run where its block ends. */
  ends: Offsets;
  bytes: number;
  ended: RunEnd | undefined;
  endedAt: number;
  followers: Set<Follower>;
}

/**
 * Numbers kept in a typed array, grown by doubling: off the heap, so the garbage collector never
 * walks them (a run of 100,000 events has 800 KB of them), and trimmed when the run ends.
 */
class Offsets {
  private a = new Float64Array(16);
  length = 0;

  push(v: number): void {
    if (this.length === this.a.length) {
      const b = new Float64Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.length++] = v;
  }

  at(i: number): number {
    return this.a[i] as number;
  }

  /** The numbers from the `i`-th on, each less `minus`. */
  after(i: number, minus: number): number[] {
    const out: number[] = [];
    for (let k = i; k < this.length; k++) out.push((this.a[k] as number) - minus);
    return out;
  }

  trim(): void {
    if (this.a.length > this.length) this.a = this.a.slice(0, this.length);
  }
}

/**
 * The open parts are sealed into one segment once this many bytes wait, when the run ends, and
 * before a read: encoded once, into a buffer of their exact size outside Node's shared pool.
 */
const SEAL_BYTES = 256 * 1024;

function seal(r: Run): void {
  if (r.open.length === 0) return;
  const segment = Buffer.allocUnsafeSlow(r.openBytes);
  let at = 0;
  for (const s of r.open) at += segment.write(s, at, "utf8");
  r.starts.push(r.bytes - r.openBytes);
  r.segments.push(segment);
  r.open = [];
  r.openBytes = 0;
}

/** The run's bytes from `from` to `to`. */
function bytesOf(r: Run, from: number, to: number): Buffer {
  seal(r);
  const parts: Buffer[] = [];
  // The segment holding byte `from`: the last that starts at or before it.
  let seg = 0;
  for (let lo = 0, hi = r.starts.length - 1; lo <= hi; ) {
    const mid = (lo + hi) >> 1;
    if ((r.starts[mid] as number) <= from) {
      seg = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  for (; seg < r.segments.length && (r.starts[seg] as number) < to; seg++) {
    const s = r.starts[seg] as number;
    const b = r.segments[seg] as Buffer;
    parts.push(b.subarray(Math.max(0, from - s), Math.min(b.length, to - s)));
  }
  return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
}

/** Where the `seq`-th event (1-based) starts in the run. */
const startOf = (r: Run, seq: number): number => (seq <= 1 ? 0 : r.ends.at(seq - 2));

/** The events after the `after`-th (0: all), as text. */
function eventsAfter(r: Run, after: number): LoggedEvents {
  const from = startOf(r, after + 1);
  const bytes = bytesOf(r, from, r.bytes);
  const text = bytes.toString("utf8");
  const byteEnds = r.ends.after(after, from);
  // ASCII: every character one byte. Else each event is decoded on its own to count its characters.
  if (text.length === bytes.length) return { text, ends: byteEnds };
  const ends: number[] = [];
  let chars = 0;
  let prev = 0;
  for (const end of byteEnds) {
    chars += bytes.toString("utf8", prev, end).length;
    ends.push(chars);
    prev = end;
  }
  return { text, ends };
}

/** Where each event of a part ends in bytes, given where it ends in characters. */
function byteEnds(text: string, ends: readonly number[], bytes: number): readonly number[] {
  if (bytes === text.length) return ends;
  const out: number[] = [];
  let at = 0;
  let from = 0;
  for (const end of ends) {
    at += Buffer.byteLength(text.slice(from, end), "utf8");
    out.push(at);
    from = end;
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
    this.runs.set(run, { start, segments: [], starts: [], open: [], openBytes: 0, ends: new Offsets(), bytes: 0, ended: undefined, endedAt: 0, followers: new Set() });
    this.threads.set(threadKey(start.threadId, start.path), run);
    return Promise.resolve();
  }

  append(run: string, events: LoggedEvents): void {
    const r = this.runs.get(run);
    if (!r || r.ended !== undefined || events.ends.length === 0) return;
    this.use(run, r);
    const bytes = Buffer.byteLength(events.text, "utf8");
    if (r.bytes + bytes > this.caps.maxRunBytes) return this.drop(run, r, "unresumable");
    for (const end of byteEnds(events.text, events.ends, bytes)) r.ends.push(r.bytes + end);
    r.open.push(events.text);
    r.openBytes += bytes;
    r.bytes += bytes;
    this.total += bytes;
    if (r.openBytes >= SEAL_BYTES) seal(r);
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
    r.ends.trim();
    for (const f of r.followers) f.end(reason);
    r.followers.clear();
  }

  find(run: string): Promise<RunInfo | undefined> {
    const r = this.live(run);
    return Promise.resolve(r && { ...r.start, run, events: r.ends.length, ended: r.ended });
  }

  idAt(run: string, seq: number): Promise<string | undefined> {
    const r = this.live(run);
    if (r && seq === 0) return Promise.resolve(r.start.opening);
    if (!r || seq < 1 || seq > r.ends.length) return Promise.resolve(undefined);
    return Promise.resolve(idOfBlock(bytesOf(r, startOf(r, seq), r.ends.at(seq - 1)).toString("utf8")));
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
