import { describe, expect, it } from "vitest";
import { formatCurve, formatHeader, formatSummary, runSoak } from "../../scripts/soak-lib.js";
import { BINARY } from "../helpers/spawn.js";

/**
 * The short soak for `npm test`; `npm run soak` runs the long one (1,000,000
 * requests over 20,000 ids with --max-threads 10000). Same workload and same
 * checks, scaled down: 60,000 requests over 2,000 thread ids against
 * dist/agui-state --max-threads 1000, every answer predicted by an exact
 * model of the thread store (see scripts/soak-lib.ts), RSS sampled every
 * 5,000 requests.
 *
 * The sidecar runs with its V8 old generation capped at 64 MiB (its live heap
 * here is under 40 MiB). With V8's default heap limit, RSS in a run this short
 * is still climbing while V8 sizes its heap (about +50% between 10,000 and
 * 60,000 requests, in steps, the same for every seed), which would hide a leak
 * as well as fake one. Capped, RSS reflects what is live, and a leak either
 * shows as growth past the tolerance or ends the sidecar with an out-of-memory
 * crash, which the run reports as lost responses.
 */
const SEED = Number(process.env["SOAK_SEED"] ?? 20261130);

describe("soak (short)", () => {
  it("60,000 requests over 2,000 thread ids with --max-threads 1,000: every answer as predicted, evictions add up, RSS flat on the plateau", async () => {
    const report = await runSoak({
      binary: BINARY,
      requests: 60_000,
      ids: 2_000,
      maxThreads: 1_000,
      seed: SEED,
      statsEvery: 1_000,
      sampleEvery: 5_000,
      nodeOptions: "--max-old-space-size=64",
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
