/**
 * Fuzzes the running sidecar with seeded, replayable streams of hostile
 * messages (scripts/fuzz/), NDJSON and LSP, and checks after each stream:
 * - the process lived until stdin ended (or SIGTERM), then exited 0, and its
 *   stderr is pino records with nothing logged at error level;
 * - stdout parses completely as frames of the input's framing;
 * - every id of a well-formed request is answered exactly once, no id is
 *   answered that was never sent, and the id-null answers are within bounds;
 * - no -32603; every error has a string data.code; calls that must fail fail;
 *   pure methods answer what the contract says;
 * - every delta applies with fast-json-patch applyPatch(s, d, true, false), as
 *   @ag-ui/client applies it; replaying a thread's events lands on getState
 *   (state and version) mid-stream and at the end; what openRun, diffState and
 *   diffToolState did matches what was asked;
 * - sentinel threads, opened first and never named again, are unchanged.
 *
 *   npm run fuzz                   ~20k messages in 4 streams (what npm test runs)
 *   npm run fuzz -- --long         ~600k messages in 24 streams
 *   npm run fuzz -- --seed N       replay (also FUZZ_SEED=N); the same options give the same streams
 *   --streams N, --messages N (per stream), --huge N (per stream); FUZZ_BIN=path fuzzes another build
 *   --witness N                    cases of the three-witness differential (scripts/witness/): every delta
 *                                  (STATE_DELTA, and ACTIVITY_DELTA patches on activity contents) applied
 *                                  with fast-json-patch, python-json-patch and evanphx/json-patch;
 *                                  default 100,000 with --long, 2,000 otherwise
 */
import { fuzz, type FuzzOptions, type StreamReport } from "./fuzz/run.js";
import { startPeer } from "./harness/peer.js";
import { runDifferential } from "./witness/differential.js";
import { goWitness, pythonWitness, type Witness } from "./witness/peers.js";

/** The differential, in slices of 10,000 cases so that no batch for a peer grows without bound. */
async function witnessRun(seed: number, count: number): Promise<string[]> {
  const witnesses: Witness[] = [];
  const lines: string[] = [];
  for (const p of [pythonWitness(), goWitness()]) {
    if (p.witness) witnesses.push(p.witness);
    else if (process.env["CI"] === "true") throw new Error(`witness missing under CI: ${p.missing}`);
    else lines.push(`  WITNESS MISSING   ${p.missing} (install it as .ci/run does)`);
  }
  const peer = startPeer({ stderr: "ignore", keepFrames: false });
  const deltas: Record<string, number> = {};
  const agreed: Record<string, number> = {};
  let baselines = 0;
  const faults: string[] = [];
  for (let done = 0, slice = 0; done < count; slice++) {
    const n = Math.min(10_000, count - done);
    const r = await runDifferential(peer, witnesses, { seed: seed + slice, count: n, prefix: `w${slice}` });
    for (const [k, v] of Object.entries(r.deltas)) deltas[k] = (deltas[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.agreed)) agreed[k] = (agreed[k] ?? 0) + v;
    baselines += r.baselines;
    faults.push(...r.disagreements.map((d) => `seed ${seed + slice} case ${d.caseId} (${d.method}, ${d.witness}): ${d.message.slice(0, 2000)}`));
    done += n;
  }
  peer.end();
  await peer.waitForExit(60_000);
  lines.push(`  witness cases:     ${count} (seeds ${seed}..${seed + Math.ceil(count / 10_000) - 1})`);
  lines.push(`  witness deltas:    ${Object.entries(deltas).map(([k, v]) => `${k} ${v}`).join(", ")}`);
  lines.push(`  witness baselines: ${baselines} ACTIVITY_SNAPSHOT events checked against getActivity`);
  for (const [k, v] of Object.entries(agreed)) lines.push(`  witness agreed:    ${k}: ${v}`);
  lines.push(`  witness faults:    ${faults.length}`);
  for (const f of faults.slice(0, 20)) lines.push(`  FAULT ${f}`);
  return lines;
}

async function main(): Promise<void> {
  const arg = (name: string): string | undefined => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
  const long = process.argv.includes("--long");
  const seedText = arg("--seed") ?? process.env["FUZZ_SEED"];
  const seed = seedText !== undefined ? Number(seedText) : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isSafeInteger(seed)) throw new Error(`bad seed ${seedText}`);
  const o: FuzzOptions = { seed, streams: Number(arg("--streams") ?? (long ? 24 : 4)), messages: Number(arg("--messages") ?? (long ? 25_000 : 5_000)), huge: Number(arg("--huge") ?? (long ? 6 : 2)), log: (l) => console.error(l) };
  const others = process.argv.slice(2).filter((a, i, all) => a !== "--seed" && all[i - 1] !== "--seed");
  console.error(`[fuzz] seed ${seed} (replay: npm run fuzz -- ${[...others, "--seed", seed].join(" ")})`);
  const t0 = performance.now();
  const reports = await fuzz(o);
  const witnessCount = Number(arg("--witness") ?? (long ? 100_000 : 2_000));
  const witnessLines = witnessCount > 0 ? await witnessRun(seed, witnessCount) : [];
  const sum = (f: (r: StreamReport) => number): number => reports.reduce((a, r) => a + f(r), 0);
  const faults = reports.flatMap((r) => r.faults.map((f) => `stream seed ${r.seed} (${r.framing}): ${f}`));
  const count = (framing: string): number => reports.filter((r) => r.framing === framing).length;
  console.log(`fuzz summary: seed ${seed}, ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  console.log(`  streams:           ${reports.length} (${count("ndjson")} NDJSON, ${count("lsp")} LSP; ${reports.filter((r) => r.tight).length} under tight limits, ${reports.filter((r) => r.sigterm).length} stopped by SIGTERM or SIGINT)`);
  console.log(`  messages sent:     ${sum((r) => r.messages)} (${(sum((r) => r.bytes) / 1e6).toFixed(1)} MB)`);
  console.log(`  frames received:   ${sum((r) => r.frames)} (${sum((r) => r.responses)} responses)`);
  console.log(`  requests answered: ${sum((r) => r.answered)} ids; ${sum((r) => r.certain)} well-formed requests checked answered exactly once`);
  console.log(`  replica checks:    ${sum((r) => r.deltas)} deltas replayed with fast-json-patch, ${sum((r) => r.compared)} getState answers compared`);
  console.log(`  faults found:      ${faults.length}`);
  console.log(`  seeds:             ${reports.map((r) => r.seed).join(", ")}`);
  for (const f of faults) console.log(`  FAULT ${f}`);
  for (const l of witnessLines) console.log(l);
  process.exitCode = faults.length || witnessLines.some((l) => l.startsWith("  FAULT")) ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
