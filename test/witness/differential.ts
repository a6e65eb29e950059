import jsonpatch from "fast-json-patch";
import fc from "fast-check";
import { fromEntries, type Json, type JsonObject } from "../../src/core/index.js";
import { paths } from "../harness/arbitraries.js";
import { sameJson } from "../harness/json.js";
import type { Peer } from "../harness/peer.js";
import type { Witness, WitnessCase } from "./peers.js";

/**
 * The three-witness differential (protocol/README.md §1): every delta the
 * sidecar returns from normalize, applyOps, diffState and diffToolState must
 * apply, starting from the state before it, with fast-json-patch as
 * @ag-ui/client runs it, with python-json-patch and with evanphx/json-patch,
 * and land on the state the sidecar reports. States and ops are drawn from
 * the hostile key set, and the ops are partly broken on purpose.
 */

/** Keys that trip pointer code: escapes, "-", "", prototype names, index-like and non-ASCII names. */
export const HOSTILE_KEYS = ["a", "b", "-", "~", "/", "~1", "a/b", "m~n", "", "__proto__", "constructor", "prototype", "0", "01", "1e0", "é", "日本", "😀"];

const key = fc.constantFrom(...HOSTILE_KEYS);
const scalar = fc.oneof(fc.constant(null), fc.boolean(), fc.integer({ min: -1000, max: 1000 }), fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }).filter((d) => !Object.is(d, -0)), fc.string({ maxLength: 4 }), key);
const value: fc.Arbitrary<Json> = fc.letrec<{ v: Json }>((tie) => ({
  v: fc.oneof({ depthSize: "small" }, scalar, fc.array(tie("v"), { maxLength: 3 }), fc.array(fc.tuple(key, tie("v")), { maxLength: 3 }).map(fromEntries)),
})).v;
const object: fc.Arbitrary<JsonObject> = fc.array(fc.tuple(key, value), { maxLength: 5 }).map(fromEntries);

/** Ops against a state: mostly aimed at what exists (or one step past it), the root included, some broken. */
function opsFor(state: Json): fc.Arbitrary<unknown[]> {
  const existing = paths(state);
  const target = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...existing) },
    { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...existing), fc.oneof(key, fc.constantFrom("-", "5", "99"))).map(([p, k]) => [...p, k]) },
    { weight: 1, arbitrary: fc.constant([] as string[]) },
  );
  // Half the pointers go as arrays of raw segments (escaped by the sidecar), half as strings, some unescaped by mistake.
  const pointer = fc.tuple(target, fc.integer({ min: 0, max: 5 })).map(([p, how]): unknown => (how < 2 ? p : how < 5 ? p.map((s) => "/" + s.replace(/~/g, "~0").replace(/\//g, "~1")).join("") : p.map((s) => "/" + s).join("")));
  const op = fc.oneof(
    fc.record({ op: fc.constantFrom("add", "replace", "test"), path: pointer, value }),
    fc.record({ op: fc.constant("remove"), path: pointer }),
    fc.record({ op: fc.constantFrom("move", "copy"), from: pointer, path: pointer }),
  );
  return fc.array(op, { maxLength: 6 });
}

export interface Disagreement {
  method: string;
  witness: string;
  caseId: number;
  message: string;
}

export interface DifferentialReport {
  seed: number;
  /** Deltas collected, per method. */
  deltas: Record<string, number>;
  /** Cases each witness applied and agreed on. */
  agreed: Record<string, number>;
  disagreements: Disagreement[];
}

interface Collected extends WitnessCase {
  method: string;
  expect: Json;
}

const fastJsonPatch: Witness = {
  name: "fast-json-patch 3.1.1 (as @ag-ui/client applies it)",
  run(cases) {
    const out = new Map<number, { ok: true; doc: unknown } | { ok: false; error: string }>();
    for (const c of cases) {
      try {
        out.set(c.id, { ok: true, doc: jsonpatch.applyPatch(structuredClone(c.doc), structuredClone(c.patch) as jsonpatch.Operation[], true, false).newDocument });
      } catch (e) {
        out.set(c.id, { ok: false, error: (e as Error).message.split("\n")[0] ?? "refused" });
      }
    }
    return out;
  },
};

type Result = Record<string, unknown>;

/** Plays `count` cases through the sidecar behind `peer`, then has every witness apply every delta. */
export async function runDifferential(peer: Peer, witnesses: readonly Witness[], opts: { seed: number; count: number; prefix?: string }): Promise<DifferentialReport> {
  const caseArb = fc.tuple(object, object, value, fc.integer({ min: 0, max: 3 })).chain(([s, m, v, form]) => fc.tuple(fc.constant(s), fc.constant(m), fc.constant(v), fc.constant(form), opsFor(s)));
  const samples = fc.sample(caseArb, { seed: opts.seed, numRuns: opts.count });
  const collected: Collected[] = [];
  const add = (method: string, doc: Json, result: Result, after: Json): void => {
    const patch = result["delta"] as unknown[];
    if (patch.length) collected.push({ id: collected.length, method, doc, patch, expect: after });
  };
  for (let i = 0; i < samples.length; i++) {
    const [state, map, v, form, ops] = samples[i] as [JsonObject, JsonObject, Json, number, unknown[]];
    const t = `${opts.prefix ?? "diff"}-${i}`;
    const norm = await peer.ok("normalize", { ops, state });
    add("normalize", state, norm, norm["state"] as Json);

    await peer.ok("openRun", { threadId: t, state });
    const applied = await peer.ok("applyOps", { threadId: t, ops });
    const afterOps = (await peer.ok("getState", { threadId: t }))["state"] as Json;
    add("applyOps", state, applied, afterOps);

    // diffState at the root (an object), or at a path that exists, or one just past it.
    const at = form === 0 ? [] : (fc.sample(fc.constantFrom(...paths(afterOps)), { seed: opts.seed + i, numRuns: 1 })[0] as string[]);
    const target = at.length === 0 && (typeof v !== "object" || v === null || Array.isArray(v)) ? map : v;
    const diffed = await peer.call("diffState", { threadId: t, path: at, value: target });
    if ("result" in diffed) add("diffState", afterOps, diffed.result as Result, (await peer.ok("getState", { threadId: t }))["state"] as Json);

    const ns = `${opts.prefix ?? "diff"}-ns-${i}`;
    await peer.ok("openRun", { threadId: ns, state: {}, toolState: state });
    const before = (await peer.ok("getState", { threadId: ns }))["state"] as Json;
    const tool = await peer.ok("diffToolState", form % 2 ? { threadId: ns, toolState: map } : { threadId: ns, set: map, remove: Object.keys(state).filter((k) => !Object.hasOwn(map, k)).slice(0, 2) });
    add("diffToolState", before, tool, (await peer.ok("getState", { threadId: ns }))["state"] as Json);
    await peer.ok("closeThread", { threadId: t });
    await peer.ok("closeThread", { threadId: ns });
  }

  const report: DifferentialReport = { seed: opts.seed, deltas: {}, agreed: {}, disagreements: [] };
  for (const c of collected) report.deltas[c.method] = (report.deltas[c.method] ?? 0) + 1;
  for (const w of [fastJsonPatch, ...witnesses]) {
    const verdicts = w.run(collected);
    let agreed = 0;
    for (const c of collected) {
      const v = verdicts.get(c.id);
      const fail = (message: string): void => void report.disagreements.push({ method: c.method, witness: w.name, caseId: c.id, message: `${message}; state ${JSON.stringify(c.doc)}; delta ${JSON.stringify(c.patch)}` });
      if (!v) fail("no verdict");
      else if (!v.ok) fail(`refused: ${v.error}`);
      else if (!sameJson(v.doc, c.expect)) fail(`landed on ${JSON.stringify(v.doc)}, the sidecar on ${JSON.stringify(c.expect)}`);
      else agreed++;
    }
    report.agreed[w.name] = agreed;
  }
  return report;
}
