import { err, ok, type Result } from "../core/index.js";

/** Why an id names no open stream (protocol/README.md §14). */
export type UnknownStreamReason = "never opened" | "closed" | "evicted" | "idle";

interface Entry<T> {
  readonly value: T;
  /** When a call last found the stream, on the store's clock. */
  used: number;
}

export interface StreamStoreLimits {
  /** Open streams; opening one more closes the least recently used (--max-streams). */
  maxStreams: number;
  /** A stream no call has found for longer than this is closed (--stream-idle-ms). */
  idleMs: number;
  /** What ids start with: `s` (streams, the default) or `r` (rejoin reads). */
  prefix?: string;
}

/**
 * The open streams, most recently used last, as ThreadStore keeps threads.
 * Time is given by the caller on every call (no timer, no clock of its own):
 * idle streams are closed lazily, on the next call that reaches the store,
 * which is what lets a test drive it with a fake clock. Ids are `s1`, `s2`,
 * ... in order of opening and never reused; the ids of streams that went
 * away are remembered (up to `maxTombstones`, oldest dropped first) so a
 * later call can say why. `dropped`, when set, is told of every value the
 * store lets go without close(): evicted, idle or shed, so its owner can end
 * what the value still holds open (a resumable run, a rejoin's read).
 */
export class StreamStore<T> {
  private readonly open = new Map<string, Entry<T>>();
  private readonly tombstones = new Map<string, Exclude<UnknownStreamReason, "never opened">>();
  private next = 1;
  private evictions = 0;
  dropped: ((value: T, reason: "evicted" | "idle") => void) | undefined;

  constructor(
    private readonly limits: StreamStoreLimits,
    private readonly maxTombstones = Math.max(1024, limits.maxStreams * 4),
  ) {}

  /** Open streams, as of the last call. */
  get size(): number {
    return this.open.size;
  }

  /** Streams closed by either limit since start: evicted past maxStreams, or idle. */
  get evicted(): number {
    return this.evictions;
  }

  /** Stores a new stream and returns its id; past maxStreams, the least recently used one goes. */
  add(value: T, now: number): string {
    this.sweep(now);
    while (this.open.size >= this.limits.maxStreams) this.drop(this.open.keys().next().value as string, "evicted");
    const id = `${this.limits.prefix ?? "s"}${this.next++}`;
    this.open.set(id, { value, used: now });
    return id;
  }

  /** Finds an open stream and marks it used; otherwise says why the id names none. */
  get(id: string, now: number): Result<T, UnknownStreamReason> {
    this.sweep(now);
    const entry = this.open.get(id);
    if (!entry) return err(this.tombstones.get(id) ?? "never opened");
    // Map keeps insertion order: re-inserting moves the stream to the young end.
    this.open.delete(id);
    entry.used = now;
    this.open.set(id, entry);
    return ok(entry.value);
  }

  /** Forgets an open stream (remembered as closed); returns it, or why the id names none. */
  close(id: string, now: number): Result<T, UnknownStreamReason> {
    const found = this.get(id, now);
    if (found.ok) {
      this.open.delete(id);
      this.bury(id, "closed");
    }
    return found;
  }

  /**
   * Closes every open stream `match` picks, remembered as closed, and returns them: what a
   * connection to a shared sidecar held when it went away (protocol/README.md §2). They are not
   * counted as evicted, and `dropped` is not told: the caller ends what they hold.
   */
  closeWhere(match: (value: T) => boolean): T[] {
    const out: T[] = [];
    for (const [id, entry] of this.open) {
      if (!match(entry.value)) continue;
      this.open.delete(id);
      this.bury(id, "closed");
      out.push(entry.value);
    }
    return out;
  }

  /**
   * Closes least recently used streams, the `keep` most recent always kept,
   * until the sizes `size` gives them add up to `bytes`: what a heap ceiling
   * does once no thread is left to evict (protocol/README.md §7). They go as
   * `--max-streams` evicts. Returns their ids, oldest first.
   */
  shed(bytes: number, size: (value: T) => number, keep = 1): string[] {
    const out: string[] = [];
    let freed = 0;
    while (freed < bytes && this.open.size > keep) {
      const [id, entry] = this.open.entries().next().value as [string, Entry<T>];
      freed += size(entry.value);
      this.drop(id, "evicted");
      out.push(id);
    }
    return out;
  }

  /** The sum of the open streams' sizes, as `size` gives them. */
  bytes(size: (value: T) => number): number {
    let total = 0;
    for (const entry of this.open.values()) total += size(entry.value);
    return total;
  }

  /** Closes every stream idle for longer than the limit; the oldest are first in the map, so it stops at the first fresh one. */
  sweep(now: number): void {
    for (const [id, entry] of this.open) {
      if (now - entry.used <= this.limits.idleMs) return;
      this.drop(id, "idle");
    }
  }

  private drop(id: string, reason: "evicted" | "idle"): void {
    const entry = this.open.get(id);
    this.open.delete(id);
    if (entry) this.dropped?.(entry.value, reason);
    this.bury(id, reason);
    this.evictions++;
  }

  private bury(id: string, reason: Exclude<UnknownStreamReason, "never opened">): void {
    this.tombstones.delete(id);
    this.tombstones.set(id, reason);
    if (this.tombstones.size > this.maxTombstones) this.tombstones.delete(this.tombstones.keys().next().value as string);
  }
}
