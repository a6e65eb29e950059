import { afterAll, beforeAll, expect, it } from "vitest";
import { startPeer, type Peer } from "../../scripts/harness/peer.js";
import { goWitness, pythonWitness, type Probe, type Witness } from "../../scripts/witness/peers.js";
import { runDifferential } from "../../scripts/witness/differential.js";

/**
 * The short run of the three-witness differential (npm run fuzz -- --long runs
 * 100,000 cases). A witness whose toolchain is missing fails under CI=true, as
 * the client tests do, and is skipped loudly elsewhere.
 */
const CASES = Number(process.env["WITNESS_CASES"] ?? 1500);
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261201 : Math.floor(Math.random() * 2 ** 31);

const probes: [string, Probe][] = [
  ["python-json-patch (Debian python3-jsonpatch)", pythonWitness()],
  ["evanphx/json-patch (Debian golang-github-evanphx-json-patch-dev)", goWitness()],
];
const witnesses: Witness[] = [];
for (const [name, p] of probes) {
  if (p.witness) witnesses.push(p.witness);
  else if (process.env["CI"] === "true") it(`${name} is installed`, () => expect.fail(`${name} is missing under CI (${p.missing}); .ci/run should have installed it`));
  else process.stderr.write(`\n!!! ${name} not found (${p.missing}): the differential runs WITHOUT it. Install it as .ci/run does.\n\n`);
}

let peer: Peer;
beforeAll(() => {
  peer = startPeer();
});
afterAll(async () => {
  peer.end();
  await peer.waitForExit();
});

it(`every delta from normalize, applyOps, diffState and diffToolState, and every ACTIVITY_DELTA patch from applyActivityOps and diffActivity, applies with every witness and lands on the sidecar's state or activity content (${CASES} cases)`, async () => {
  process.stderr.write(`[witness] seed ${seed} (replay: FUZZ_SEED=${seed} npx vitest run test/witness)\n`);
  const r = await runDifferential(peer, witnesses, { seed, count: CASES });
  process.stderr.write(`[witness] deltas ${JSON.stringify(r.deltas)}; ${r.baselines} activity baselines; agreed ${JSON.stringify(r.agreed)}\n`);
  expect(r.disagreements.slice(0, 5), `seed ${seed}`).toEqual([]);
  // Every method produced deltas, and every witness saw all of them.
  const total = Object.values(r.deltas).reduce((a, b) => a + b, 0);
  for (const m of ["normalize", "applyOps", "diffState", "diffToolState", "applyActivityOps", "diffActivity"]) expect(r.deltas[m] ?? 0, m).toBeGreaterThan(CASES / 10);
  // Every case set an activity's baseline with an ACTIVITY_SNAPSHOT that getActivity confirmed.
  expect(r.baselines).toBe(CASES);
  expect(Object.keys(r.agreed)).toHaveLength(1 + witnesses.length);
  for (const n of Object.values(r.agreed)) expect(n).toBe(total);
}, 600_000);
