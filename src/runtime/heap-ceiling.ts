import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Log } from "../log.js";

/**
 * The heap ceiling (protocol/README.md §7, `--max-heap`): when the heap's live
 * data nears the ceiling, the least recently used threads are evicted, the
 * same eviction as `--max-threads`, before V8 could run out; when threads are
 * not enough, the least recently used runs of the run log (§16), then the
 * least recently used open streams (§14) go the same way.
 *
 * The ceiling is ours, not V8's. V8's own limit (`--max-old-space-size`) can
 * only be set when the process starts: passed to the single binary it makes
 * the binary reject its code cache and print a warning that is not a JSON
 * line, and V8 reaching it kills the process. Watching the heap from inside
 * needs neither.
 */

/** What the ceiling needs to know of the heap: V8 in the process, a fake in unit tests. */
export interface HeapProbe {
  /** Bytes of the heap in use, garbage not yet collected included. */
  used(): number;
  /** A full collection, so that used() is the live data; false when it cannot be forced. */
  collect(): boolean;
}

/** What the ceiling needs of the threads (or the open streams): their bytes, and a way to evict the oldest. */
export interface Sheddable {
  stateBytes(): number;
  /** Evicts least recently used ones whose bytes add up to `bytes`, the most recent kept; returns their ids. */
  shed(bytes: number): string[];
}

/**
 * What the ceiling needs of the run log (resume/log.ts's RunLog): the bytes it keeps, and a way to
 * shed its least recently used runs (RunLog.shed).
 */
export interface SheddableLog {
  stats(): { bytes: number };
  shed(bytes: number): string[];
}

/** A store with nothing to evict. */
const NOTHING: Sheddable = { stateBytes: () => 0, shed: () => [] };

/** Above this fraction of the ceiling, the heap is looked at closely (a full collection). */
export const HIGH = 0.9;
/** Eviction frees down to this fraction of the ceiling, so the next look is not the next request. */
export const TARGET = 0.7;
/** At least this many checks between two forced collections that evicted nothing. */
export const COOL_DOWN = 256;

export class HeapCeiling {
  private checks = 0;
  private lastCollect = -Infinity;

  constructor(
    readonly ceiling: number,
    private readonly heap: HeapProbe,
    private readonly threads: Sheddable,
    private readonly log: Log,
    /** Heap in use before any thread existed: what eviction cannot free. */
    private readonly floor = heap.used(),
    /** The open streams, evicted once the threads and the runs are not enough (none: a store without streams). */
    private readonly streams: Sheddable = NOTHING,
    /** The run log (protocol/README.md §16), shed once the threads are not enough (none: no resume). */
    private readonly runs: SheddableLog | undefined = undefined,
  ) {}

  /**
   * Called between chunks of input, never during a call. Cheap when the heap
   * is below HIGH × ceiling: one V8 statistics read (docs/benchmarks.md,
   * "Figures behind choices in the source"). Above it:
   * a full collection, and if the live data is still above TARGET × ceiling,
   * evictions of the oldest threads sized by how many heap bytes a state
   * byte has cost, then of the run log's oldest runs, then of the oldest open
   * streams, each only for what the ones before could not free. Returns the
   * ids evicted: threads', runs', streams'.
   */
  check(): string[] {
    this.checks++;
    const used = this.heap.used();
    if (used < HIGH * this.ceiling) return [];
    // Over the ceiling itself, look at once; between HIGH and the ceiling, not
    // more often than COOL_DOWN checks apart, or a live set that sits there
    // would cost a full collection per request.
    if (used < this.ceiling && this.checks - this.lastCollect < COOL_DOWN) return [];
    this.lastCollect = this.checks;
    const live = this.heap.collect() ? this.heap.used() : used;
    // Only live data past HIGH is a reason to evict: a collection forced by garbage that finds the live set
    // between TARGET (where the last eviction left it) and HIGH evicts nothing, so reading, which adds garbage
    // and no live data, never evicts.
    if (live < HIGH * this.ceiling) return [];
    const threadBytes = this.threads.stateBytes();
    const streamBytes = this.streams.stateBytes();
    // Heap bytes per state byte, as threads and streams cost now (2 to 3 for typical JSON; never taken below 1).
    const perByte = Math.max(1, (live - this.floor) / Math.max(1, threadBytes + streamBytes));
    // Heap bytes to free, whatever gives them.
    let left = live - TARGET * this.ceiling;
    const evicted = this.threads.shed(Math.ceil(left / perByte));
    left -= (threadBytes - this.threads.stateBytes()) * perByte;
    // Then the run log, for what the threads could not give, before the streams: an evicted run costs a
    // client only if it is cut and rejoins within the retention, where a stream evicted mid-response is a
    // response its middleware passes on unrepaired. A byte of the log is taken as a byte of heap: its
    // sealed events are off the heap, so this frees at most what it says, and the next check sheds more.
    // They are not in perByte for the same reason: they would make every thread byte look cheaper than it is.
    const runBytes = this.runs?.stats().bytes ?? 0;
    const runs = left > 0 && runBytes > 0 && this.runs ? this.runs.shed(Math.ceil(left)) : [];
    if (runs.length) left -= runBytes - (this.runs?.stats().bytes ?? 0);
    // The streams only for what the threads and runs could not give: an evicted thread costs its server one openRun.
    const streams = left > 0 && streamBytes > 0 ? this.streams.shed(Math.ceil(left / perByte)) : [];
    const fields = {
      heapUsed: live,
      maxHeapBytes: this.ceiling,
      evicted: evicted.length,
      first: evicted[0],
      last: evicted[evicted.length - 1],
      ...(runs.length ? { runsEvicted: runs.length, firstRun: runs[0], lastRun: runs[runs.length - 1] } : {}),
      ...(streams.length ? { streamsEvicted: streams.length, firstStream: streams[0], lastStream: streams[streams.length - 1] } : {}),
    };
    const what = ["threads", ...(runs.length ? ["runs of the run log"] : []), ...(streams.length ? ["open streams"] : [])];
    if (evicted.length || runs.length || streams.length) this.log.warn(fields, `the heap neared --max-heap: evicted the least recently used ${what.join(", then ")}`);
    else this.log.warn(fields, "the heap neared --max-heap, and no thread, run or stream is left to evict but the most recent");
    if (evicted.length || runs.length || streams.length) this.heap.collect();
    return [...evicted, ...runs, ...streams];
  }
}

/**
 * V8's heap in this process. The full collection is V8's own gc(), reached
 * through a flag set at run time (--expose-gc on the command line would
 * change the flags the single binary's code cache was made with), and only
 * the first time it is needed: the new context it takes costs start-up time.
 */
export function v8Heap(): HeapProbe {
  let gc: (() => void) | null | undefined;
  const reach = (): (() => void) | null => {
    try {
      setFlagsFromString("--expose-gc");
      return runInNewContext("gc") as () => void;
    } catch {
      return null;
    }
  };
  return {
    used: () => getHeapStatistics().used_heap_size,
    collect: () => {
      if (gc === undefined) gc = reach();
      if (gc === null) return false;
      gc();
      return true;
    },
  };
}

/** The ceiling to use: the one asked for, kept under V8's own limit with room to collect. */
export function effectiveCeiling(asked: number, v8Limit = getHeapStatistics().heap_size_limit): { ceiling: number; clamped: boolean } {
  const most = Math.floor(v8Limit * 0.8);
  return asked <= most ? { ceiling: asked, clamped: false } : { ceiling: most, clamped: true };
}
