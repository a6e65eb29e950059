import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Json, JsonObject } from "../../src/core/index.js";
import { StreamChecker } from "../../src/stream/checker.js";
import type { Finding, Reported } from "../../src/stream/findings.js";
import { StreamFixer, type Policy } from "../../src/stream/fixer.js";
import { wipes } from "../../src/stream/snapshots.js";
import { replayThroughClient, sseBlocks } from "./reference.js";
import { toSse } from "./streams.js";

/**
 * Issue 41, against the real @ag-ui/client 1.0.0:
 * - a run's first owned snapshot is a diff against a known baseline (the request's RunAgentInput.state,
 *   `--state`), not the whole `add` that resynchronizes a client whose state is not known, which stays
 *   for a baseline not known and for a stream opened again without its replay (`resync`);
 * - `check --own`: a snapshot that replaces only owned members is no finding; a member of the client's
 *   outside them that it drops or changes is still `wiped`.
 */
const J = (e: unknown): string => JSON.stringify(e);
const started = (runId: string) => J({ type: "RUN_STARTED", threadId: "t", runId });
const finished = (runId: string) => J({ type: "RUN_FINISHED", threadId: "t", runId });
const snapshot = (s: Json) => J({ type: "STATE_SNAPSHOT", snapshot: s });
const OWN: Policy = { own: [["table"], ["status"]], snapshots: "pass", joinKeys: false, lifecycle: "pass" };

/** A LangGraph-like table: `rows` rows of about 200 bytes each, row `changed` given another value. */
function table(rows: number, changed = -1, value = "v2"): JsonObject {
  const out: JsonObject = {};
  for (let i = 0; i < rows; i++) out[`row-${i}`] = { id: i, text: "x".repeat(180), value: i === changed ? value : "v1" };
  return out;
}

/** The client's state before the run: what LangGraph sent last time, and its own key. */
const before: JsonObject = { table: table(200), status: "idle", ui: { panel: "table" } };
/** A run as LangGraph sends it: a snapshot of the whole graph state after each node, without the client's key. */
const run = toSse([started("r2"), snapshot({ table: table(200, 3), status: "busy" }), snapshot({ table: table(200, 3, "v3"), status: "done" }), finished("r2")]);

function fix(state: JsonObject | undefined, resync = false): { out: string; fixer: StreamFixer; findings: Reported[] } {
  const findings: Reported[] = [];
  const fixer = new StreamFixer({ ...(state ? { state: structuredClone(state) } : {}), resync, policy: OWN, onFinding: (f) => findings.push(f) });
  return { out: fixer.push(run) + fixer.end(), fixer, findings };
}

const deltas = (out: string): unknown[][] =>
  sseBlocks(out)
    .map((b) => JSON.parse(b.replace(/^data: /, "")) as { type: string; delta?: unknown[] })
    .filter((e) => e.type === "STATE_DELTA")
    .map((e) => e.delta ?? []);

describe("a run's first owned snapshot against a known baseline (issue 41)", () => {
  it("is a diff of the owned members: the changed row and the status, not the whole table again", async () => {
    const { out, fixer } = fix(before);
    expect(deltas(out)).toEqual([
      [
        { op: "add", path: "/table/row-3", value: { id: 3, text: "x".repeat(180), value: "v2" } },
        { op: "replace", path: "/status", value: "busy" },
      ],
      [
        { op: "add", path: "/table/row-3", value: { id: 3, text: "x".repeat(180), value: "v3" } },
        { op: "replace", path: "/status", value: "done" },
      ],
    ]);
    const real = await replayThroughClient(sseBlocks(out), before);
    expect(real.warnings).toEqual([]);
    expect(real.error).toBeUndefined();
    expect(real.state).toEqual({ table: table(200, 3, "v3"), status: "done", ui: { panel: "table" } });
    expect(real.state).toEqual(fixer.state);
    // The bytes the diff saves: the table is about 44 KB, the diff under 1 KB.
    expect(out.length).toBeLessThan(2_000);
  });

  it("without a known baseline, or opened again without its replay (resync), the first is one add of each owned member, whole", async () => {
    for (const [state, resync] of [[undefined, false], [before, true]] as const) {
      const { out, fixer } = fix(state, resync);
      const [first, second] = deltas(out);
      expect(first).toEqual([
        { op: "add", path: "/table", value: table(200, 3) },
        { op: "add", path: "/status", value: "busy" },
      ]);
      expect(second).toHaveLength(2);
      // It applies whatever the client held: here, a client that had lost track and holds only its own key.
      const real = await replayThroughClient(sseBlocks(out), { ui: { panel: "table" } });
      expect(real.warnings).toEqual([]);
      expect(real.state).toEqual({ table: table(200, 3, "v3"), status: "done", ui: { panel: "table" } });
      expect(fixer.state).toMatchObject({ table: table(200, 3, "v3"), status: "done" });
    }
  });

  it("on generated baselines and snapshots, the client lands on the mirror with no warning", async () => {
    const member = fc.oneof(fc.dictionary(fc.string({ maxLength: 3 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }), fc.jsonValue({ maxDepth: 2 }));
    const states = fc.record({ table: member, status: member, ui: member }, { requiredKeys: ["ui"] });
    const snapshots = fc.array(fc.record({ table: member, status: member }, { requiredKeys: [] }), { minLength: 1, maxLength: 4 });
    await fc.assert(
      fc.asyncProperty(states, snapshots, async (state, snaps) => {
        const base = JSON.parse(J(state)) as JsonObject;
        const text = toSse([started("r"), ...snaps.map((s) => snapshot(JSON.parse(J(s)) as Json)), finished("r")]);
        const fixer = new StreamFixer({ state: structuredClone(base), policy: OWN });
        const out = fixer.push(text) + fixer.end();
        const real = await replayThroughClient(sseBlocks(out), base);
        expect(real.warnings).toEqual([]);
        expect(real.state).toEqual(fixer.state);
        expect((fixer.state as JsonObject)["ui"]).toEqual(base["ui"]);
      }),
      { numRuns: 60 },
    );
  });
});

describe("check --own (issue 41)", () => {
  const findings = (state: JsonObject, text: string, own: string[][] = []): string[] => {
    const checker = new StreamChecker(structuredClone(state), undefined, own);
    return [...checker.push(text), ...checker.end()].map((f: Finding) => `${f.kind} ${f.code} ${f.pointer ?? ""}`);
  };
  // The thread's second run as LangGraph alone leaves it: the client holds LangGraph's state, nothing of its own.
  const langgraphOnly: JsonObject = { table: table(200), status: "idle" };

  it("a snapshot that replaces only owned members and keeps every other member is no finding", () => {
    expect(findings(langgraphOnly, run)).toEqual(["wiped SNAPSHOT_WIPE /table", "wiped SNAPSHOT_WIPE /status"]);
    expect(findings(langgraphOnly, run, [["table"], ["status"]])).toEqual([]);
  });

  it("a member the client held outside own that a snapshot drops or changes is still wiped", () => {
    expect(findings(before, run, [["table"], ["status"]])).toEqual(["wiped SNAPSHOT_WIPE /ui"]);
    expect(findings(before, run, [["table"]])).toEqual(["wiped SNAPSHOT_WIPE /status", "wiped SNAPSHOT_WIPE /ui"]);
  });

  it("a nested owned member: the rest of its root member is the client's", () => {
    const held: JsonObject = { doc: { body: "a", meta: { by: "me" } } };
    const own = [["doc", "body"]];
    expect(wipes(held, { doc: { body: "b", meta: { by: "me" } } }, () => true, own)).toEqual([]);
    expect(wipes(held, { doc: { body: "b" } }, () => true, own)).toEqual([{ name: "doc", pointer: "/doc", change: "replaces" }]);
    expect(wipes(held, {}, () => true, own)).toEqual([{ name: "doc", pointer: "/doc", change: "removes" }]);
    expect(wipes({ doc: { body: "a" } }, {}, () => true, own)).toEqual([]);
    expect(wipes(held, {}, () => true)).toEqual([{ name: "doc", pointer: "/doc", change: "removes" }]);
  });
});
