import { setFlagsFromString } from "node:v8";
import type { HeapProbe } from "./heap-ceiling.js";

/**
 * V8's heap sizing in `serve`, for a heap that follows its live data (docs/memory.md has every
 * figure below). Each setting is a V8 flag read by the collector as it runs, so setting it after
 * start works, and none touches the single binary's code cache (flags given at start must also be
 * given to the builder of the binary, or the binary rejects its cache and says so on stderr).
 */

/** The old generation's growth past what a full collection left, in per cent, while the heap is small. */
export const GROWING_PERCENT = 30;
/** The same once the heap is large (LARGE_HEAP). */
export const LARGE_HEAP_GROWING_PERCENT = 10;
/** Heap in use from which the heap is large. */
export const LARGE_HEAP = 128 * 1024 * 1024;
/** Heap in use under which a large heap is small again (well under LARGE_HEAP, so a heap near it does not flip back and forth). */
export const SMALL_AGAIN = 64 * 1024 * 1024;
/** Characters from which a message is a whole state or a stream's worth of it (a snapshot of a large state). */
export const LARGE_MESSAGE = 256 * 1024;

/**
 * Sets the sizing at start:
 * - the old generation grows GROWING_PERCENT past what a full collection left before the next one
 *   (V8's default picks 1.1× to 4× from the collector's speed; under churn it picked the high end);
 * - the young generation keeps its first 1 MiB semi-space instead of growing to the binary's
 *   --max-semi-space-size (each of its spaces counts toward RSS).
 * Measured under the soak's churn, the two roughly halve peak RSS over the live state for a modest
 * rise in CPU time spent collecting.
 */
export function tuneHeap(): HeapTuning {
  setFlagsFromString(`--heap-growing-percent=${GROWING_PERCENT}`);
  setFlagsFromString("--semi-space-growth-factor=1");
  return new HeapTuning();
}

/**
 * What the sizing changes to as the process runs:
 * - V8's own sizing is given back once a message of LARGE_MESSAGE characters or more comes (issue
 *   41). A 1 MiB semi-space and a +30% old generation suit the churn of many small threads, but a
 *   process that parses a megabyte state per message (a framework that snapshots its whole state
 *   after every node, through a middleware) then spends more CPU collecting than repairing: each
 *   state's objects outgrow the nursery and are promoted, and each megabyte string goes straight to
 *   the old generation's large-object space, so at +30% the old generation is collected about twice
 *   a run (39 full collections in 22 runs of six 1.13 MB snapshots, against the proxy's 3 on V8's
 *   defaults). From the first such message on, the semi-space grows by V8's default factor, up to
 *   the binary's --max-semi-space-size, and the old generation by the factor V8 picks from the
 *   collector's speed (`--heap-growing-percent=0` is V8's "not set"): what the proxy runs with.
 * - The old generation grows LARGE_HEAP_GROWING_PERCENT past its live data once the heap in use
 *   reaches LARGE_HEAP, whichever of the two it grew by before, and goes back to that under
 *   SMALL_AGAIN (issue 42). 30% (or V8's own factor, 1.1× to 4×) of a small heap is a few MiB, and
 *   spares the collections a heap of a few large states would otherwise pay for again and again
 *   (a framework's megabyte snapshots); the same of a heap holding thousands of threads is tens of
 *   MiB per sidecar (a long churn of threads).
 */
export class HeapTuning {
  private grown = false;
  private large = false;

  constructor(private readonly setFlags: (flags: string) => void = setFlagsFromString) {}

  /** A message of `chars` characters came. */
  message(chars: number): void {
    if (this.grown || chars < LARGE_MESSAGE) return;
    this.grown = true;
    this.setFlags("--semi-space-growth-factor=2");
    // A large heap keeps its own step until it is small again.
    if (!this.large) this.setFlags(this.smallHeapGrowth());
  }

  /** The heap in use is `bytes`, as the heap ceiling read it between two chunks of input. */
  heapUsed(bytes: number): void {
    if (!this.large && bytes >= LARGE_HEAP) {
      this.large = true;
      this.setFlags(`--heap-growing-percent=${LARGE_HEAP_GROWING_PERCENT}`);
    } else if (this.large && bytes < SMALL_AGAIN) {
      this.large = false;
      this.setFlags(this.smallHeapGrowth());
    }
  }

  /** `probe`, telling this tuning each reading of the heap in use: the ceiling's reading, taken once. */
  watch(probe: HeapProbe): HeapProbe {
    return {
      used: () => {
        const bytes = probe.used();
        this.heapUsed(bytes);
        return bytes;
      },
      collect: () => probe.collect(),
    };
  }

  /** The old generation's growth while the heap is small: GROWING_PERCENT, or V8's own once a large message came. */
  private smallHeapGrowth(): string {
    return `--heap-growing-percent=${this.grown ? 0 : GROWING_PERCENT}`;
  }
}
