import fc from "fast-check";
import jsonpatch, { type Operation } from "fast-json-patch";
import { describe, expect, it } from "vitest";
import { toWireOp, type Json, type JsonObject } from "../../src/core/index.js";
import { StreamChecker } from "../../src/stream/checker.js";
import type { Finding, Reported } from "../../src/stream/findings.js";
import { StreamFixer, type Policy } from "../../src/stream/fixer.js";
import { Lifecycle } from "../../src/stream/lifecycle.js";
import { ownedOps, snapshotDelta, unowned, wipes } from "../../src/stream/snapshots.js";
import { enforceStage, transport, verifyStage } from "../../src/stream/stages.js";
import { replayThroughClient, sseBlocks } from "./reference.js";
import { stream, toSse } from "./streams.js";

/**
 * Issue 23: the pipeline's stages one by one, and the repair policies of its
 * apply stage (--own, --snapshots delta, --join-keys) against the real
 * @ag-ui/client 1.0.0: what fix writes applies with no warning and ends on
 * fix's mirror, the client's own keys survive snapshots, and every finding
 * says what fix did with it.
 */
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261202 : undefined;
const opts = { numRuns: Number(process.env["FC_RUNS"] ?? 100), ...(seed !== undefined ? { seed } : {}) };

const J = (e: unknown): string => JSON.stringify(e);
const started = (runId = "r1") => J({ type: "RUN_STARTED", threadId: "t", runId });
const finished = (runId = "r1") => J({ type: "RUN_FINISHED", threadId: "t", runId });
const snapshot = (s: Json) => J({ type: "STATE_SNAPSHOT", snapshot: s });
const delta = (...ops: unknown[]) => J({ type: "STATE_DELTA", delta: ops });
const where = { event: 1, line: 1 };
const OWN: Policy = { own: [["toolState"]], snapshots: "pass", joinKeys: false };

function fix(text: string, state: JsonObject, policy?: Policy): { out: string; fixer: StreamFixer; findings: Reported[] } {
  const findings: Reported[] = [];
  const fixer = new StreamFixer({ state: structuredClone(state), ...(policy ? { policy } : {}), onFinding: (f) => findings.push(f) });
  return { out: fixer.push(text) + fixer.end(), fixer, findings };
}

/** fix's output through the real client: no warning, no error, and fix's mirror. */
async function applies(out: string, state: JsonObject, fixer: StreamFixer): Promise<void> {
  const real = await replayThroughClient(sseBlocks(out), state);
  expect(real.warnings).toEqual([]);
  expect(real.error).toBeUndefined();
  expect(real.state).toEqual(fixer.state);
}

describe("the stages, one at a time", () => {
  it("transport: JSON, an object, a type; anything else is fatal", () => {
    expect(transport("{", 1, 1)).toMatchObject({ decision: "fatal", findings: [{ code: "INVALID_JSON", kind: "fatal", outcome: "passed" }] });
    expect(transport("[1]", 1, 1)).toMatchObject({ decision: "fatal", findings: [{ code: "INVALID_EVENT" }] });
    expect(transport('{"type":""}', 1, 1)).toMatchObject({ decision: "fatal", findings: [{ code: "INVALID_EVENT" }] });
    expect(transport(started(), 1, 1)).toMatchObject({ decision: "pass", at: { event: 1, line: 1, type: "RUN_STARTED" } });
  });

  it("enforce: drops an unknown type, strips an op the schema does not know, fails on a missing value", () => {
    const at = { ...where, type: "NOPE" };
    expect(enforceStage({ type: "NOPE" }, at)).toMatchObject({ decision: "drop", findings: [{ kind: "dropped", code: "UNKNOWN_EVENT" }] });
    const sat = { ...where, type: "STATE_DELTA" };
    const stripped = enforceStage({ type: "STATE_DELTA", delta: [{ op: "increment", path: "/a" }, { op: "add", path: "/b", value: 1 }] }, sat);
    expect(stripped).toMatchObject({ decision: "strip", kept: [1], findings: [{ kind: "dropped", index: 0, code: "INVALID_OP", hint: "the ops are add, remove, replace, move, copy and test" }] });
    expect(enforceStage({ type: "STATE_DELTA", delta: [{ op: "add", path: "/a" }] }, sat)).toMatchObject({ decision: "fatal", findings: [{ kind: "fatal", index: 0, code: "INVALID_OP", hint: "`add` needs a `value` (null is a value)" }] });
    expect(enforceStage({ type: "STATE_DELTA", delta: [] }, sat)).toMatchObject({ decision: "pass", findings: [] });
  });

  it("verify: the first event must start a run; a peek changes nothing", () => {
    const life = new Lifecycle();
    const at = { ...where, type: "STATE_DELTA" };
    const d = { type: "STATE_DELTA", delta: [] } as never;
    expect(verifyStage(life, d, at, "peek")).toMatchObject({ decision: "fatal", findings: [{ kind: "fatal", code: "FIRST_EVENT" }] });
    expect(verifyStage(life, { type: "RUN_STARTED", threadId: "t", runId: "r" } as never, at, "feed")).toEqual({ decision: "pass", findings: [] });
    expect(verifyStage(life, d, at, "feed")).toEqual({ decision: "pass", findings: [] });
  });
});

describe("snapshots, as the policy's ops", () => {
  const held: JsonObject = { selectedLayer: "era5", toolState: { a: 1, b: { x: 1 } } };

  it("--own: one add of the owned member at a run's first write; then one op per key that moved; nothing when nothing moved", () => {
    const next: JsonObject = { toolState: { a: 1, b: { x: 2 }, c: 3 }, other: 1 };
    expect(ownedOps(held, next, [["toolState"]], true).map(toWireOp)).toEqual([{ op: "add", path: "/toolState", value: next["toolState"] }]);
    expect(ownedOps(held, next, [["toolState"]], false).map(toWireOp)).toEqual([
      { op: "add", path: "/toolState/b", value: { x: 2 } },
      { op: "add", path: "/toolState/c", value: 3 },
    ]);
    expect(ownedOps(held, { toolState: { a: 1 } }, [["toolState"]], false).map(toWireOp)).toEqual([{ op: "remove", path: "/toolState/b" }]);
    expect(ownedOps(held, { toolState: structuredClone(held["toolState"] as Json) }, [["toolState"]], false)).toEqual([]);
    // An owned member the snapshot leaves out is removed; a nested one gets its parents.
    expect(ownedOps(held, { other: 1 }, [["toolState"]], false).map(toWireOp)).toEqual([{ op: "remove", path: "/toolState" }]);
    expect(ownedOps({}, { a: { b: { c: 1 } } }, [["a", "b", "c"]], true).map(toWireOp)).toEqual([
      { op: "add", path: "/a", value: {} },
      { op: "add", path: "/a/b", value: {} },
      { op: "add", path: "/a/b/c", value: 1 },
    ]);
  });

  it("wipes: the members the client holds that a snapshot removes or replaces, among those asked about", () => {
    expect(wipes(held, { toolState: {} }, () => true)).toEqual([
      { name: "selectedLayer", pointer: "/selectedLayer", change: "removes" },
      { name: "toolState", pointer: "/toolState", change: "replaces" },
    ]);
    expect(wipes(held, structuredClone(held), () => true)).toEqual([]);
    expect(wipes(held, { toolState: {} }, (n) => n !== "toolState")).toHaveLength(1);
  });

  it("unowned (--own): every root member outside the owned ones where the snapshot differs, one the client does not hold included", () => {
    const own = [["toolState"]];
    expect(unowned(held, { toolState: { z: 1 }, selectedLayer: "cmip6", notes: "n", extra: null }, own)).toEqual([
      { name: "selectedLayer", pointer: "/selectedLayer", change: "replaces" },
      { name: "notes", pointer: "/notes", change: "adds" },
      { name: "extra", pointer: "/extra", change: "adds" },
    ]);
    expect(unowned(held, { toolState: {} }, own)).toEqual([{ name: "selectedLayer", pointer: "/selectedLayer", change: "removes" }]);
    // What the snapshot says about the owned members is the policy's ops, not a finding; equal members are not either.
    expect(unowned(held, { ...structuredClone(held), toolState: { other: 1 } }, own)).toEqual([]);
    expect(unowned(held, { toolState: {}, "a/b": 1 }, [["a/b"]])).toEqual([
      { name: "selectedLayer", pointer: "/selectedLayer", change: "removes" },
      { name: "toolState", pointer: "/toolState", change: "replaces" },
    ]);
  });

  it("--snapshots delta: the minimal delta lands on the snapshot, members it leaves out removed", () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })), fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })), (a, b) => {
        const ops = snapshotDelta(a as JsonObject, b as JsonObject);
        if (ops === undefined) return;
        const out = jsonpatch.applyPatch(structuredClone(a), ops.map(toWireOp) as Operation[], true, false).newDocument;
        expect(JSON.parse(JSON.stringify(out))).toEqual(JSON.parse(JSON.stringify(b)));
      }),
      opts,
    );
  });
});

describe("fix with a repair policy, through the real client", () => {
  const client: JsonObject = { selectedLayer: "era5", ui: { panel: "layers" } };
  const writes = (runId: string): string[] => [
    started(runId),
    snapshot({ toolState: { a: runId }, notes: "n".repeat(500) }),
    snapshot({ toolState: { a: runId, b: 2 }, notes: "n".repeat(500) }),
    snapshot({ toolState: { a: runId, b: 2 }, notes: "n".repeat(500) }),
    finished(runId),
  ];
  const text = toSse([...writes("r1"), ...writes("r2")]);

  it("--own keeps the client's keys, says so as `kept`, and sends fewer bytes; without it they are wiped", async () => {
    const { out, fixer, findings } = fix(text, client, OWN);
    await applies(out, client, fixer);
    expect(fixer.state).toEqual({ ...client, toolState: { a: "r2", b: 2 } });
    expect(out.length).toBeLessThan(text.length / 3);
    // Nothing at all when nothing moved: the third snapshot of each run is not sent.
    expect(sseBlocks(out)).toHaveLength(2 * 4);
    // Every snapshot differs from the client outside /toolState three times: it leaves out both client keys, and
    // sets `notes`, which the client does not hold (issue 23 §1: a finding whenever it differs from what the client holds).
    const perSnapshot = ["wiped kept /selectedLayer", "wiped kept /ui", "wiped kept /notes"];
    expect(findings.map((f) => `${(f as Finding).kind} ${f.outcome} ${f.pointer ?? ""}`)).toEqual(Array.from({ length: 6 }, () => perSnapshot).flat());
    expect(findings.filter((f) => f.pointer === "/notes").every((f) => f.code === "SNAPSHOT_WIPE" && /does not hold: it is not applied/.test(f.message))).toBe(true);
    expect(fixer.state).not.toHaveProperty("notes");
    expect(fixer.outcomes).toEqual({ passed: 0, mended: 0, discarded: 0, kept: 18 });
    expect(fixer.summary.wiped).toBe(6);
    expect(fixer.unfixed).toBe(0);

    const plain = fix(text, client);
    await applies(plain.out, client, plain.fixer);
    expect(plain.out).toBe(text);
    expect(plain.fixer.state).not.toHaveProperty("selectedLayer");
    expect(plain.findings.map((f) => [f.event, (f as Finding).kind, f.pointer, f.outcome])).toEqual([
      [2, "wiped", "/selectedLayer", "passed"],
      [2, "wiped", "/ui", "passed"],
    ]);
    const checker = new StreamChecker(structuredClone(client));
    expect([...checker.push(text), ...checker.end()]).toEqual(plain.findings);
    expect(checker.summary).toMatchObject({ wiped: 1, dropped: 0, fatal: 0 });
  });

  it("--snapshots delta ends on the state the snapshots give, in fewer bytes", async () => {
    const { out, fixer } = fix(text, client, { own: [], snapshots: "delta", joinKeys: false });
    await applies(out, client, fixer);
    expect(fixer.state).toEqual({ toolState: { a: "r2", b: 2 }, notes: "n".repeat(500) });
    expect(out.length).toBeLessThan(text.length / 2);
  });

  it("--join-keys reads an unescaped key as one member, when the op then applies, and says it mended it", async () => {
    const state: JsonObject = { toolState: {} };
    const stream = toSse([started(), delta({ op: "add", path: "/toolState/raster-ops/dataset", value: "era5" }), finished()]);
    const joined = fix(stream, state, { own: [], snapshots: "pass", joinKeys: true });
    await applies(joined.out, state, joined.fixer);
    expect(joined.fixer.state).toEqual({ toolState: { "raster-ops/dataset": "era5" } });
    expect(joined.findings.map((f) => [f.code, f.outcome])).toEqual([["PATH_NOT_FOUND", "mended"]]);
    // Not the default: without it the op is not sent.
    const plain = fix(stream, state);
    expect(plain.fixer.state).toEqual(state);
    expect(plain.findings.map((f) => [f.code, f.outcome])).toEqual([["PATH_NOT_FOUND", "discarded"]]);
    // A path through a member that exists, or an array, is never joined.
    const array = fix(toSse([started(), delta({ op: "add", path: "/list/x/y", value: 1 }), finished()]), { list: [] }, { own: [], snapshots: "pass", joinKeys: true });
    expect(array.findings.map((f) => f.outcome)).toEqual(["discarded"]);
  });

  it("on fuzzed streams, --own and --join-keys still write what the client applies, and count every finding by its outcome", async () => {
    await fc.assert(
      fc.asyncProperty(stream(true), fc.boolean(), async (c, joinKeys) => {
        const { out, fixer, findings } = fix(toSse(c.events), c.state, { own: [["toolState"]], snapshots: "pass", joinKeys });
        const counts = { passed: 0, mended: 0, discarded: 0, kept: 0 };
        for (const f of findings) counts[f.outcome]++;
        expect(fixer.outcomes).toEqual(counts);
        if (fixer.unfixed > 0) return;
        const real = await replayThroughClient(sseBlocks(out), c.state);
        expect(real.warnings).toEqual([]);
        expect(real.error).toBeUndefined();
        if (!/__proto__|constructor|prototype/.test(out)) expect(real.state).toEqual(fixer.state);
      }),
      opts,
    );
  });
});
