import type { Sample, SoakSettings } from "./options.js";

/** What the memory curve says, and the figures the summary prints. */
export interface CurveFindings {
  /** The first sample after the store was full, and the growth from it to the end (V8's heap warm-up included; reported, not checked). */
  fullSample: Sample | undefined;
  fullGrowth: number | undefined;
  baseline: Sample | undefined;
  /** (last RSS - baseline RSS) / baseline RSS. */
  growth: number | undefined;
  /** Least-squares slope of RSS over the samples after the plateau, as a fraction of the baseline per 100,000 requests. */
  slopePer100k: number | undefined;
}

export const mib = (kib: number): string => (kib / 1024).toFixed(1);

/**
 * Reads the RSS curve from the plateau on (store full, turned over
 * warmupTurnovers times): growth past `tolerance`, or a strict rise over the
 * last `trendSamples` samples of more than `trendFloor` in all, is reported
 * through `fail`.
 */
export function readCurve(curve: Sample[], fullAt: number | undefined, plateauAt: number | undefined, evictions: number, opts: SoakSettings, fail: (why: string) => void): CurveFindings {
  const last = curve[curve.length - 1];
  const fullSample = fullAt === undefined ? undefined : curve.find((c) => c.requests >= fullAt);
  const fullGrowth = fullSample && last ? (last.rssKiB - fullSample.rssKiB) / fullSample.rssKiB : undefined;
  const found: CurveFindings = { fullSample, fullGrowth, baseline: undefined, growth: undefined, slopePer100k: undefined };
  if (plateauAt === undefined) {
    fail(
      fullAt === undefined
        ? `the live thread count never reached --max-threads ${opts.maxThreads}: no plateau to check (use more requests or ids)`
        : `the store never turned over ${opts.warmupTurnovers} times (${evictions} evictions, ${opts.warmupTurnovers * opts.maxThreads} needed): no plateau to check (use more requests)`,
    );
    return found;
  }
  const post = curve.filter((c) => c.requests >= plateauAt);
  const baseline = post[0];
  const end = post[post.length - 1];
  if (!baseline || !end || post.length < 3) {
    fail(`only ${post.length} RSS samples after the plateau at request ${plateauAt}; need 3 (sample more often)`);
    return found;
  }
  found.baseline = baseline;
  found.growth = (end.rssKiB - baseline.rssKiB) / baseline.rssKiB;
  if (found.growth > opts.tolerance) fail(`RSS grew ${(found.growth * 100).toFixed(1)}% after the plateau (${mib(baseline.rssKiB)} MiB at ${baseline.requests} → ${mib(end.rssKiB)} MiB at ${end.requests}); tolerance ${(opts.tolerance * 100).toFixed(0)}%`);
  const n = post.length;
  const mx = post.reduce((a, c) => a + c.requests, 0) / n;
  const my = post.reduce((a, c) => a + c.rssKiB, 0) / n;
  const num = post.reduce((a, c) => a + (c.requests - mx) * (c.rssKiB - my), 0);
  const den = post.reduce((a, c) => a + (c.requests - mx) ** 2, 0);
  found.slopePer100k = den ? ((num / den) * 100_000) / baseline.rssKiB : 0;
  const tail = post.slice(-opts.trendSamples);
  const head = tail[0] as Sample;
  const rising = tail.length >= 3 && tail.every((c, k) => k === 0 || c.rssKiB > (tail[k - 1] as Sample).rssKiB);
  if (rising && (end.rssKiB - head.rssKiB) / head.rssKiB > opts.trendFloor) {
    fail(`RSS rose at every one of the last ${tail.length} samples (${tail.map((c) => mib(c.rssKiB)).join(" → ")} MiB), ${(((end.rssKiB - head.rssKiB) / head.rssKiB) * 100).toFixed(1)}% in all: growth after the plateau`);
  }
  return found;
}
