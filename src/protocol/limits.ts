import type { Limits } from "./types.generated.js";

/** The default limits (protocol/README.md §7; the document's x-limits). */
export const DEFAULT_LIMITS: Readonly<Limits> = {
  maxMessageBytes: 64 * 1024 * 1024,
  maxOps: 10_000,
  maxDepth: 256,
  maxStateBytes: 32 * 1024 * 1024,
  maxThreads: 10_000,
  // protocol/README.md §7: a fixed 1 GiB, not derived from the other limits (10,000 threads of up to
  // 32 MiB each would allow 320 GB). It leaves room for the largest single request the defaults allow.
  maxHeapBytes: 1024 * 1024 * 1024,
  // protocol/README.md §14: each open stream holds a mirror and up to fix's remembered ids.
  maxStreams: 1000,
  // protocol/README.md §14: long enough for a model that thinks for minutes between two events.
  streamIdleMs: 10 * 60 * 1000,
};

/**
 * protocol/README.md §7: the params walk allows --max-depth plus the levels a
 * value sits below params: params → ops → [i] → value.
 */
export const ENVELOPE_DEPTH = 3;
