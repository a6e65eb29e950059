/**
 * The share of generated AG-UI runs with lifecycle faults (issue 40,
 * scripts/harness/lifecycle-runs.ts) that fail in the real @ag-ui/client after
 * `agui-state fix`, with `--lifecycle repair` and with `--lifecycle pass`
 * (the default). Each run goes through the built binary (dist/agui-state
 * fix --state FILE), then into HttpAgent.runAgent, its fetch answering with
 * fix's output; a run fails when runAgent rejects or a run it saw start never
 * ends. A fixed seed: the same build gives the same figures.
 *
 *   node scripts/ensure-built.mjs && npx tsx scripts/lifecycle-share.ts [--runs N] [--seed N]
 */
import fc from "fast-check";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SEA, run } from "./harness/process.js";
import { failed, runHttp } from "./harness/lifecycle-client.js";
import { generatedRun, toSse, type GeneratedRun } from "./harness/lifecycle-runs.js";

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(name);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
};
const RUNS = arg("--runs", 200);
const SEED = arg("--seed", 40);
/** How many fix processes run at once. */
const PARALLEL = 8;

const work = mkdtempSync(path.join(tmpdir(), "agui-lifecycle-share-"));

/** Whether run `i` fails in the client after `fix` with these flags. */
async function fails(r: GeneratedRun, i: number, flags: readonly string[]): Promise<boolean> {
  const state = path.join(work, `state-${i}.json`);
  writeFileSync(state, JSON.stringify(r.input.state));
  const fixed = await run(SEA, ["fix", "--state", state, ...flags], toSse(r.events));
  // 1: an event the client refuses went out as it came (with --lifecycle pass, the lifecycle's breaks); 2 and up: fix failed.
  if (fixed.code !== 0 && fixed.code !== 1) throw new Error(`fix exited ${String(fixed.code)}: ${fixed.stderr}`);
  return failed(await runHttp(r.input, fixed.stdout.toString("utf8")));
}

/** How many of the runs fail with these flags. */
async function count(runs: readonly GeneratedRun[], flags: readonly string[]): Promise<number> {
  let failing = 0;
  for (let i = 0; i < runs.length; i += PARALLEL) {
    const batch = runs.slice(i, i + PARALLEL).map((r, k) => fails(r, i + k, flags));
    for (const f of await Promise.all(batch)) if (f) failing++;
  }
  return failing;
}

async function main(): Promise<void> {
  const runs = fc.sample(generatedRun, { seed: SEED, numRuns: RUNS });
  const pct = (n: number) => `${n}/${RUNS} (${((100 * n) / RUNS).toFixed(1)}%)`;
  console.log(`generated runs: ${RUNS} (seed ${SEED})`);
  let raw = 0;
  for (const r of runs) if (failed(await runHttp(r.input, toSse(r.events)))) raw++;
  console.log(`  fail in @ag-ui/client as the server sent them:     ${pct(raw)}`);
  console.log(`  fail after fix --lifecycle pass (the default):    ${pct(await count(runs, ["--lifecycle", "pass"]))}`);
  console.log(`  fail after fix --lifecycle repair:                ${pct(await count(runs, ["--lifecycle", "repair"]))}`);
}

main()
  .catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => rmSync(work, { recursive: true, force: true }));
