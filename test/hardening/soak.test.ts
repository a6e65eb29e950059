import { describe, expect, it } from "vitest";
import { BINARY } from "../../scripts/harness/process.js";
import { runSoak } from "../../scripts/soak/driver.js";
import { formatCurve, formatHeader, formatSummary } from "../../scripts/soak/report.js";

/**
 * The short soak for `npm test`; `npm run soak` runs the long one (1,000,000
 * requests over 20,000 ids with --max-threads 10000). Same workload and same
 * answer checks, scaled down: 60,000 requests over 2,000 thread ids against
 * dist/agui-state --max-threads 1000, every answer predicted by an exact
 * model of the thread store (see scripts/soak/), stats.stateBytes included to
 * the byte, RSS sampled every 5,000 requests.
 *
 * The RSS curve is printed, not checked: a figure a loaded machine can push
 * past a threshold does not belong in a pass/fail test (npm run soak checks
 * it). What is checked here is exact: the sidecar runs with --max-heap 64MiB
 * (its live heap here is under 40 MiB, below the ceiling's 70% target), so a
 * leak would make it evict threads the model did not predict, and log that
 * it did: either fails the run.
 */
const SEED = Number(process.env["SOAK_SEED"] ?? 20261130);

describe("soak (short)", () => {
  it("60,000 requests over 2,000 thread ids with --max-threads 1,000 under --max-heap 64MiB: every answer as predicted, evictions add up, no crash", async () => {
    const report = await runSoak({
      binary: BINARY,
      requests: 60_000,
      ids: 2_000,
      maxThreads: 1_000,
      seed: SEED,
      statsEvery: 1_000,
      sampleEvery: 5_000,
      maxHeap: "64MiB",
      checkMemory: false,
    });
    const text = [formatHeader(report.options), formatCurve(report), formatSummary(report)].join("\n");
    expect(report.failures, text).toEqual([]);
    // The run exercised what it is meant to: continuous eviction, and recovery from it.
    expect(report.responses, text).toBe(60_000);
    expect(report.evictions, text).toBeGreaterThan(4 * 1_000);
    expect(report.errors["-32001 evicted"] ?? 0, text).toBeGreaterThan(1_000);
    expect(report.errors["-32001 closed"] ?? 0, text).toBeGreaterThan(0);
    expect(report.errors["-32001 never opened"] ?? 0, text).toBeGreaterThan(0);
    expect(report.curve.length, text).toBe(13);
    expect(report.exitCode, text).toBe(0);
  }, 45_000);
});
