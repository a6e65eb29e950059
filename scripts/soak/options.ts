import { BINARY } from "../harness/process.js";

/** What a soak run takes, and what it reports. */

export interface SoakOptions {
  /** Total requests, every stats and recovery call included. */
  requests: number;
  /** Distinct thread ids the requests are drawn from. */
  ids: number;
  maxThreads: number;
  seed: number;
  /** Requests kept in flight. */
  window?: number;
  /** A stats call every this many requests (its answer is checked against the model). */
  statsEvery?: number;
  /** An RSS sample (with a stats call) every this many requests. */
  sampleEvery?: number;
  /**
   * Fail the run when RSS grows on the plateau (default). The short soak in
   * `npm test` turns this off: it reports the curve, and a leak there shows as
   * an out-of-memory crash under its heap cap (lost responses), not as an RSS
   * figure a loaded machine could push past a threshold.
   */
  checkMemory?: boolean;
  /** Allowed RSS growth from the first sample after the plateau to the end, as a fraction. */
  tolerance?: number;
  /** How many of the last samples may not rise strictly in a row (with a rise over `trendFloor`). */
  trendSamples?: number;
  /** Total rise across the last `trendSamples` samples that counts as growth, as a fraction. */
  trendFloor?: number;
  /**
   * The plateau starts once the store is full and has turned over this many
   * times (evictions >= warmupTurnovers x maxThreads): by then every live
   * thread was opened under steady-state traffic, and V8 has sized its heap
   * for the steady-state live set. 0: as soon as the store is full.
   */
  warmupTurnovers?: number;
  /** NODE_OPTIONS for the sidecar (for example a V8 heap cap); none by default. */
  nodeOptions?: string;
  /** The sidecar's --max-heap (protocol/README.md §7), such as "64MiB"; its default when empty. */
  maxHeap?: string;
  binary?: string;
  /** Fails the run when no response arrives for this long. */
  stallMs?: number;
  /** Called with each curve row as it is sampled. */
  onSample?: (s: Sample) => void;
}

export interface Sample {
  requests: number;
  rssKiB: number;
  threads: number;
  stateBytes: number;
  evicted: number;
  elapsedMs: number;
}

export interface SoakReport {
  options: SoakSettings;
  /** VmRSS of the same sidecar started the same way, after one call. */
  emptyRssKiB: number;
  /** stats.stateBytes at the last sample: the live state. */
  liveStateBytes: number;
  /** B11: (peak RSS − empty RSS) / live state bytes; undefined with no live state. */
  churnRatio: number | undefined;
  sent: number;
  responses: number;
  curve: Sample[];
  /** Request number at which the model's live thread count first reached --max-threads. */
  fullAt: number | undefined;
  /** Request number from which the plateau is checked: full, and turned over warmupTurnovers times. */
  plateauAt: number | undefined;
  /** The first sample after fullAt, and the growth from it to the end (V8's heap warm-up included; reported, not checked). */
  fullSample: Sample | undefined;
  fullGrowth: number | undefined;
  baseline: Sample | undefined;
  /** (last RSS - baseline RSS) / baseline RSS. */
  growth: number | undefined;
  /** Least-squares slope of RSS over the samples after the plateau, as a fraction of the baseline per 100,000 requests. */
  slopePer100k: number | undefined;
  peakRssKiB: number;
  durationMs: number;
  evictions: number;
  created: number;
  closed: number;
  live: number;
  errors: Record<string, number>;
  methods: Record<string, number>;
  /** stats calls answered, each checked against the model, stateBytes exactly. */
  statsCalls: number;
  stderrWarnings: number;
  /** Node's own warnings on stderr (a V8 flag in NODE_OPTIONS makes the binary reject its code cache and say so). */
  nodeWarnings: number;
  exitCode: number | null;
  failures: string[];
}

/** The options with every default filled in. */
export type SoakSettings = Required<Omit<SoakOptions, "onSample">>;

export function defaults(o: SoakOptions): SoakSettings {
  return {
    requests: o.requests,
    ids: o.ids,
    maxThreads: o.maxThreads,
    seed: o.seed >>> 0,
    window: o.window ?? 32,
    checkMemory: o.checkMemory ?? true,
    statsEvery: o.statsEvery ?? 1000,
    sampleEvery: o.sampleEvery ?? 100_000,
    tolerance: o.tolerance ?? 0.15,
    trendSamples: o.trendSamples ?? 5,
    trendFloor: o.trendFloor ?? 0.03,
    warmupTurnovers: o.warmupTurnovers ?? 2,
    nodeOptions: o.nodeOptions ?? "",
    maxHeap: o.maxHeap ?? "",
    binary: o.binary ?? BINARY,
    stallMs: o.stallMs ?? 20_000,
  };
}
