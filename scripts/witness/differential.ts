import jsonpatch from "fast-json-patch";
import fc from "fast-check";
import { fromEntries, type Json, type JsonObject } from "../../src/core/index.js";
import { paths, valueIn } from "../harness/arbitraries.js";
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
 *
 * Activities (§10) are held to the same promise: each case also gives the
 * thread an activity (an ACTIVITY_SNAPSHOT, from diffActivity or
 * activitySnapshot, which only sets the baseline), then patches it with
 * applyActivityOps (random, partly broken ops, sometimes atomic, sometimes
 * retyping) and diffActivity (a random content, or one near the current);
 * every ACTIVITY_DELTA patch must apply with every witness to the content
 * before it and land on getActivity's content. To a witness an activity's
 * content is just another document. What the sidecar answers around those
 * patches (the events' shapes, and any refusal) is checked as it comes, and a
 * fault there is reported as a disagreement of the witness "sidecar".
 */

/** Keys that trip pointer code: escapes, "-", "", prototype names, index-like and non-ASCII names. */
export const HOSTILE_KEYS = ["a", "b", "-", "~", "/", "~1", "a/b", "m~n", "", "__proto__", "constructor", "prototype", "0", "01", "1e0", "é", "日本", "😀"];

const key = fc.constantFrom(...HOSTILE_KEYS);
/** Message ids that need escaping anywhere a careless server would put them in a pointer. */
const MESSAGE_IDS = ["plan-1", "a/b", "m~n", "-", "0", "é😀"];
const ACTIVITY_TYPES = ["plan", "search", "log"];
const scalar = fc.oneof(fc.constant(null), fc.boolean(), fc.integer({ min: -1000, max: 1000 }), fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e6, max: 1e6 }).filter((d) => !Object.is(d, -0)), fc.string({ maxLength: 4 }), key);
/** JSON values over the hostile keys; numbers stay within what a double holds exactly as written (§3). */
export const hostileValue: fc.Arbitrary<Json> = fc.letrec<{ v: Json }>((tie) => ({
  v: fc.oneof({ depthSize: "small" }, scalar, fc.array(tie("v"), { maxLength: 3 }), fc.array(fc.tuple(key, tie("v")), { maxLength: 3 }).map(fromEntries)),
})).v;
const value = hostileValue;
/** Objects over the hostile keys: a state, or an activity's content. */
export const hostileObject: fc.Arbitrary<JsonObject> = fc.array(fc.tuple(key, value), { maxLength: 5 }).map(fromEntries);
const object = hostileObject;

/** Ops against a state: mostly aimed at what exists (or one step past it), the root included, some broken. */
export function opsFor(state: Json): fc.Arbitrary<unknown[]> {
  const existing = paths(state);
  const target = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...existing) },
    { weight: 3, arbitrary: fc.tuple(fc.constantFrom(...existing), fc.oneof(key, fc.constantFrom("-", "5", "99"))).map(([p, k]) => [...p, k]) },
    { weight: 1, arbitrary: fc.constant([] as string[]) },
  );
  // Half the pointers go as arrays of raw segments (escaped by the sidecar), half as strings, some unescaped by mistake.
  const pointer = fc.tuple(target, fc.integer({ min: 0, max: 5 })).map(([p, how]): unknown => (how < 2 ? p : how < 5 ? p.map((s) => "/" + s.replace(/~/g, "~0").replace(/\//g, "~1")).join("") : p.map((s) => "/" + s).join("")));
  // Writes of what is already there, which are not sent (protocol/README.md §5 rule 8).
  const inside = existing.filter((p) => p.length > 0);
  const echo = inside.length
    ? fc.oneof(
        fc.tuple(fc.constantFrom("add", "replace"), fc.constantFrom(...inside)).map(([op, p]) => ({ op, path: p, value: valueIn(state, p) })),
        fc.tuple(fc.constantFrom("move", "copy"), fc.constantFrom(...inside), fc.constantFrom(...inside)).map(([op, from, p]) => ({ op, from, path: p })),
      )
    : fc.constant({ op: "test", path: [], value: state });
  const op = fc.oneof(
    fc.record({ op: fc.constantFrom("add", "replace", "test"), path: pointer, value }),
    fc.record({ op: fc.constant("remove"), path: pointer }),
    fc.record({ op: fc.constantFrom("move", "copy"), from: pointer, path: pointer }),
    echo,
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
  /** Deltas collected, per method (ACTIVITY_DELTA patches under applyActivityOps and diffActivity). */
  deltas: Record<string, number>;
  /** ACTIVITY_SNAPSHOT events that set an activity's baseline, checked against getActivity. */
  baselines: number;
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

/** The index of the first op of `patch` that leaves the document as it was, applied op by op as the client does; undefined when each moves it (or one is refused: the witnesses report that). */
function standsStill(doc: unknown, patch: readonly unknown[]): number | undefined {
  let now: unknown = doc;
  for (let i = 0; i < patch.length; i++) {
    let next: unknown;
    try {
      next = jsonpatch.applyPatch(structuredClone(now), [structuredClone(patch[i]) as jsonpatch.Operation], true, false).newDocument;
    } catch {
      return undefined;
    }
    if (sameJson(next, now)) return i;
    now = next;
  }
  return undefined;
}

/** Plays `count` cases through the sidecar behind `peer`, then has every witness apply every delta. */
export async function runDifferential(peer: Peer, witnesses: readonly Witness[], opts: { seed: number; count: number; prefix?: string }): Promise<DifferentialReport> {
  const caseArb = fc
    .tuple(object, object, value, fc.integer({ min: 0, max: 3 }), object, object, fc.constantFrom(...MESSAGE_IDS), fc.constantFrom(...ACTIVITY_TYPES))
    .chain(([s, m, v, form, c, c2, mid, type]) => fc.tuple(fc.constant([s, m, v, form, c, c2, mid, type] as const), opsFor(s), opsFor(c)));
  const samples = fc.sample(caseArb, { seed: opts.seed, numRuns: opts.count });
  const collected: Collected[] = [];
  const sidecarFaults: Disagreement[] = [];
  let baselines = 0;
  const add = (method: string, doc: Json, result: Result, after: Json): void => {
    const patch = result["delta"] as unknown[];
    if (patch.length) collected.push({ id: collected.length, method, doc, patch, expect: after });
  };
  for (let i = 0; i < samples.length; i++) {
    const [[state, map, v, form, content, content2, messageId, activityType], ops, activityOps] = samples[i] as [readonly [JsonObject, JsonObject, Json, number, JsonObject, JsonObject, string, string], unknown[], unknown[]];
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

    const fault = (method: string, message: string): void => void sidecarFaults.push({ method, witness: "sidecar", caseId: i, message });
    await activityCases(peer, { threadId: t, messageId, activityType, content, content2, activityOps, form, seed: opts.seed + i }, { collected, fault, baseline: () => baselines++ });

    const ns = `${opts.prefix ?? "diff"}-ns-${i}`;
    await peer.ok("openRun", { threadId: ns, state: {}, toolState: state });
    const before = (await peer.ok("getState", { threadId: ns }))["state"] as Json;
    const tool = await peer.ok("diffToolState", form % 2 ? { threadId: ns, toolState: map } : { threadId: ns, set: map, remove: Object.keys(state).filter((k) => !Object.hasOwn(map, k)).slice(0, 2) });
    add("diffToolState", before, tool, (await peer.ok("getState", { threadId: ns }))["state"] as Json);
    await peer.ok("closeThread", { threadId: t });
    await peer.ok("closeThread", { threadId: ns });
  }

  const report: DifferentialReport = { seed: opts.seed, deltas: {}, baselines, agreed: {}, disagreements: [...sidecarFaults] };
  for (const c of collected) report.deltas[c.method] = (report.deltas[c.method] ?? 0) + 1;
  // protocol/README.md §5 rule 8: nothing moved, nothing sent. Every op of every delta changes the document it meets.
  for (const c of collected) {
    const still = standsStill(c.doc, c.patch);
    if (still !== undefined) report.disagreements.push({ method: c.method, witness: "sidecar", caseId: c.id, message: `op ${still} leaves the document as it was; state ${JSON.stringify(c.doc)}; delta ${JSON.stringify(c.patch)}` });
  }
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

interface ActivityCase {
  threadId: string;
  messageId: string;
  activityType: string;
  /** The content the activity starts with. */
  content: JsonObject;
  /** A content for diffActivity, when the case does not derive one near the current content. */
  content2: JsonObject;
  /** Ops drawn against `content`. */
  activityOps: unknown[];
  form: number;
  seed: number;
}

interface ActivitySink {
  collected: Collected[];
  fault: (method: string, message: string) => void;
  baseline: () => void;
}

/**
 * One activity on an open thread: created (the ACTIVITY_SNAPSHOT baseline),
 * patched with applyActivityOps, then with diffActivity. Each ACTIVITY_DELTA
 * patch is collected with the content before it and getActivity's content
 * after it, for the witnesses.
 */
async function activityCases(peer: Peer, c: ActivityCase, sink: ActivitySink): Promise<void> {
  const { threadId, messageId } = c;
  const read = async (): Promise<{ activityType: string; content: JsonObject }> => {
    const r = await peer.ok("getActivity", { threadId, messageId });
    return { activityType: r["activityType"] as string, content: r["content"] as JsonObject };
  };
  /** The events of a change: one ACTIVITY_DELTA carrying `delta` and the type after it, or none when nothing moved. */
  const checkDelta = (method: string, result: Result, after: { activityType: string }, retyped: boolean): unknown[] | undefined => {
    const delta = result["delta"] as unknown[];
    const events = result["events"] as Result[];
    const want = delta.length > 0 || retyped ? [{ type: "ACTIVITY_DELTA", messageId, activityType: after.activityType, patch: delta }] : [];
    if (!sameJson(events, want)) return void sink.fault(method, `events ${JSON.stringify(events)}, expected ${JSON.stringify(want)}`);
    return delta;
  };

  // The baseline: an ACTIVITY_SNAPSHOT of exactly what getActivity then reports.
  const create = c.form % 2 ? "activitySnapshot" : "diffActivity";
  const made = await peer.call(create, { threadId, messageId, activityType: c.activityType, content: c.content });
  if (!("result" in made)) return sink.fault(create, `creating ${JSON.stringify(c.content)} failed: ${JSON.stringify(made.error)}`);
  let now = await read();
  const snapshot = [{ type: "ACTIVITY_SNAPSHOT", messageId, activityType: now.activityType, content: now.content }];
  if (!sameJson((made.result as Result)["events"], snapshot) || !sameJson(now.content, c.content)) return sink.fault(create, `events ${JSON.stringify((made.result as Result)["events"])} for content ${JSON.stringify(c.content)}; getActivity ${JSON.stringify(now)}`);
  sink.baseline();

  // applyActivityOps: partly broken ops; atomic in one form, retyping in another.
  const atomic = c.form === 3;
  const retype = c.form === 2 ? `${c.activityType}-2` : undefined;
  const applied = await peer.call("applyActivityOps", { threadId, messageId, ops: c.activityOps, atomic, ...(retype ? { activityType: retype } : {}) });
  const before = now.content;
  if ("result" in applied) {
    now = await read();
    const patch = checkDelta("applyActivityOps", applied.result as Result, now, retype !== undefined && retype !== c.activityType);
    if (patch?.length) sink.collected.push({ id: sink.collected.length, method: "applyActivityOps", doc: before, patch, expect: now.content });
  } else if (!(atomic && applied.error.code === -32002)) sink.fault("applyActivityOps", `ops ${JSON.stringify(c.activityOps)} failed: ${JSON.stringify(applied.error)}`);
  else if (!sameJson((await read()).content, before)) sink.fault("applyActivityOps", "a refused atomic call changed the content");

  // diffActivity: a content near the current one (random ops through normalize), or a random one.
  let target = c.content2;
  if (c.form !== 0) {
    const near = fc.sample(opsFor(now.content), { seed: c.seed, numRuns: 1 })[0] as unknown[];
    target = (await peer.ok("normalize", { ops: near, state: now.content }))["state"] as JsonObject;
  }
  const from = now.content;
  const diffed = await peer.call("diffActivity", { threadId, messageId, content: target });
  if ("result" in diffed) {
    now = await read();
    if (!sameJson(now.content, target)) sink.fault("diffActivity", `getActivity ${JSON.stringify(now.content)} after setting ${JSON.stringify(target)}`);
    const patch = checkDelta("diffActivity", diffed.result as Result, now, false);
    if (patch?.length) sink.collected.push({ id: sink.collected.length, method: "diffActivity", doc: from, patch, expect: now.content });
  } else {
    // The one refusal a content may meet: a root __proto__ member that would change, which no op can name (§6 diffState).
    const data = diffed.error.data as Result | undefined;
    const proto = Object.hasOwn(target, "__proto__") || Object.hasOwn(from, "__proto__");
    if (!(diffed.error.code === -32602 && data?.["reason"] === "FORBIDDEN_KEY" && data["field"] === "/content" && proto)) sink.fault("diffActivity", `content ${JSON.stringify(target)} failed: ${JSON.stringify(diffed.error)}`);
    else if (!sameJson((await read()).content, from)) sink.fault("diffActivity", "a refused diffActivity changed the content");
  }
}
