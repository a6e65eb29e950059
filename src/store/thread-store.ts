import { JsonDocument, err, ok, type Result } from "../core/index.js";

/** Why an id names no thread. */
export type UnknownThreadReason = "never opened" | "closed" | "evicted";

/** An AG-UI activity (protocol/README.md §10): its type and its content, a document like a thread's state. */
export interface Activity {
  type: string;
  doc: JsonDocument;
}

/** One thread's mirror of what the client holds. */
export interface Thread {
  readonly id: string;
  doc: JsonDocument;
  /**
   * The thread's activities by messageId; they share its version and its --max-state-bytes.
   * Made with the first one: most threads have none, and an empty Map costs about 360 bytes of heap,
   * megabytes over the ten thousand threads of a long churn (docs/memory.md).
   */
  activities: Map<string, Activity> | undefined;
  /** Starts at 0; +1 on every call that changed the state. */
  version: number;
  /** The root member that holds the tool state, once the thread is in namespace mode. */
  namespace?: string;
}

/**
 * The per-thread mirrors, most recently used last. Opening a thread past
 * `maxThreads` evicts the least recently used one. Forgotten ids are remembered
 * (up to `maxTombstones`, oldest dropped first) so a later call can say whether
 * the thread was closed or evicted rather than never opened.
 */
export class ThreadStore {
  private readonly threads = new Map<string, Thread>();
  private readonly tombstones = new Map<string, "closed" | "evicted">();
  private evictions = 0;
  /** The thread last in `threads` (the most recently used), while it is there. */
  private newest: Thread | undefined;

  constructor(
    private readonly maxThreads: number,
    private readonly maxTombstones = Math.max(1024, maxThreads * 4),
  ) {}

  get size(): number {
    return this.threads.size;
  }

  get evicted(): number {
    return this.evictions;
  }

  /** Finds a thread and marks it most recently used; otherwise says why the id names none. */
  get(id: string): Result<Thread, UnknownThreadReason> {
    const thread = this.threads.get(id);
    if (thread) {
      this.touch(thread);
      return ok(thread);
    }
    return err(this.tombstones.get(id) ?? "never opened");
  }

  /** Finds or creates a thread; creating one may evict the least recently used. */
  open(id: string): Thread {
    const found = this.threads.get(id);
    if (found) {
      this.touch(found);
      return found;
    }
    while (this.threads.size >= this.maxThreads) {
      const oldest = this.threads.keys().next().value as string;
      this.threads.delete(oldest);
      this.bury(oldest, "evicted");
      this.evictions++;
    }
    this.tombstones.delete(id);
    const thread: Thread = { id, doc: new JsonDocument({}), activities: undefined, version: 0 };
    this.threads.set(id, thread);
    this.newest = thread;
    return thread;
  }

  /**
   * Evicts least recently used threads until their state bytes add up to
   * `bytes`, always keeping the `keep` most recently used. Evicted exactly as
   * `--max-threads` evicts: remembered as "evicted", counted in `evicted`.
   * Returns the ids evicted, oldest first.
   */
  shed(bytes: number, keep = 1): string[] {
    const out: string[] = [];
    let freed = 0;
    while (freed < bytes && this.threads.size > keep) {
      const [id, thread] = this.threads.entries().next().value as [string, Thread];
      this.threads.delete(id);
      this.bury(id, "evicted");
      this.evictions++;
      freed += threadBytes(thread);
      out.push(id);
    }
    return out;
  }

  close(id: string): boolean {
    if (!this.threads.delete(id)) return false;
    this.bury(id, "closed");
    return true;
  }

  /** Sum of the threads' approximate state sizes, their activities' contents included. */
  stateBytes(): number {
    let total = 0;
    for (const t of this.threads.values()) total += threadBytes(t);
    return total;
  }

  /** Activities held, over all threads. */
  activities(): number {
    let total = 0;
    for (const t of this.threads.values()) total += t.activities?.size ?? 0;
    return total;
  }

  private touch(thread: Thread): void {
    // Already the most recently used (a run's calls come one after another on one thread): nothing moves.
    if (this.newest === thread) return;
    // Map keeps insertion order: re-inserting moves the thread to the young end.
    this.threads.delete(thread.id);
    this.threads.set(thread.id, thread);
    this.newest = thread;
  }

  private bury(id: string, reason: "closed" | "evicted"): void {
    if (this.newest?.id === id) this.newest = undefined;
    this.tombstones.delete(id);
    this.tombstones.set(id, reason);
    if (this.tombstones.size > this.maxTombstones) this.tombstones.delete(this.tombstones.keys().next().value as string);
  }
}

/** A thread's bytes as --max-state-bytes counts them: its state and its activities' contents. */
export function threadBytes(thread: Thread): number {
  let bytes = thread.doc.bytes;
  if (thread.activities) for (const a of thread.activities.values()) bytes += a.doc.bytes;
  return bytes;
}
