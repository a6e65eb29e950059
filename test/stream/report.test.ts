import fc from "fast-check";
import jsonpatch, { type Operation } from "fast-json-patch";
import { describe, expect, it } from "vitest";
import type { Json, JsonObject } from "../../src/core/index.js";
import { help } from "../../src/cli/help.js";
import { StreamService } from "../../src/service/stream-service.js";
import { StreamChecker } from "../../src/stream/checker.js";
import { OUTCOMES, stopsHere, type Finding, type Reported } from "../../src/stream/findings.js";
import { StreamFixer, type Policy } from "../../src/stream/fixer.js";
import { formatFinding, formatSummary } from "../../src/stream/format.js";
import { LOADED_PIPELINE } from "../../scripts/harness/paired.js";
import { replayThroughClient, sseBlocks } from "./reference.js";

/**
 * Issue 32 ("Nothing in silence"): every op fix changes or drops is reported
 * with its outcome, check names every op of a delta that fails and the one
 * the client stops at, a snapshot that may take the client's own members is
 * named without --state, a snapshot that is not an object is named at its
 * cause (and left out by fix), and one word per outcome everywhere.
 */
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261203 : undefined;
const opts = { numRuns: Number(process.env["FC_RUNS"] ?? 200), ...(seed !== undefined ? { seed } : {}) };

const J = (e: unknown): string => JSON.stringify(e);
const started = J({ type: "RUN_STARTED", threadId: "t", runId: "r" });
const finished = J({ type: "RUN_FINISHED", threadId: "t", runId: "r" });
const snapshot = (s: Json) => J({ type: "STATE_SNAPSHOT", snapshot: s });
const delta = (...ops: unknown[]) => J({ type: "STATE_DELTA", delta: ops });
const sse = (...events: string[]) => events.map((e) => `data: ${e}\n\n`).join("");

function check(text: string, state?: JsonObject): Finding[] {
  const c = new StreamChecker(state === undefined ? undefined : structuredClone(state));
  return [...c.push(text), ...c.end()];
}

function fix(text: string, state?: JsonObject, policy?: Policy): { out: string; fixer: StreamFixer; findings: Reported[] } {
  const findings: Reported[] = [];
  const fixer = new StreamFixer({ ...(state ? { state: structuredClone(state) } : {}), ...(policy ? { policy } : {}), onFinding: (f) => findings.push(f) });
  return { out: fixer.push(text) + fixer.end(), fixer, findings };
}

/** The delta: with no /todos in the state, four ops of which three are changed or dropped. */
const CASE_2 = [
  { op: "add", path: "/__proto__/x", value: 1 },
  { op: "add", path: "/todos/-", value: "milk" },
  { op: "remove", path: "/nothere" },
  { op: "add", path: "/ok", value: true },
];

describe("case 2: every op fix changes or drops is reported, and check names every op that fails", () => {
  it("fix --report: op 0 discarded, op 1 mended, op 2 discarded, op 3 sent as it came (not a finding)", () => {
    const { out, findings } = fix(sse(started, delta(...CASE_2), finished), {});
    expect(sseBlocks(out)[1]).toBe(`data: ${delta({ op: "add", path: "/todos", value: [] }, { op: "add", path: "/todos/-", value: "milk" }, { op: "add", path: "/ok", value: true })}\n\n`);
    expect(findings.map((f) => [f.index, f.pointer, f.code, f.outcome, stopsHere(f)])).toEqual([
      [0, "/__proto__/x", "FORBIDDEN_KEY", "discarded", true],
      [1, "/todos/-", "PATH_NOT_FOUND", "mended", false],
      [2, "/nothere", "PATH_NOT_FOUND", "discarded", false],
    ]);
    for (const f of findings) expect([f.event, (f as Finding).kind]).toEqual([2, "dropped"]);
  });

  it("check lists the same three ops, and marks op 0 as where the client stops", () => {
    const found = check(sse(started, delta(...CASE_2), finished), {});
    expect(found.map((f) => [f.index, f.code, f.kind, f.outcome, stopsHere(f)])).toEqual([
      [0, "FORBIDDEN_KEY", "dropped", "passed", true],
      [1, "PATH_NOT_FOUND", "dropped", "passed", false],
      [2, "PATH_NOT_FOUND", "dropped", "passed", false],
    ]);
    // --json carries the mark as a member after `outcome`; the text says it in words.
    expect(Object.keys(found[0] as object).slice(-2)).toEqual(["outcome", "stops"]);
    expect(J(found[1])).not.toContain("stops");
    expect(formatFinding(found[0] as Finding, "check", true)).toMatch(/op 0 at "\/__proto__\/x", where the client stops: FORBIDDEN_KEY/);
    expect(formatFinding(found[1] as Finding, "check", true)).not.toContain("where the client stops");
  });

  it("an op that fails only because an earlier op of the delta is left out is not named: the ops are tried in order, the failing ones skipped", () => {
    // Op 1 needs op 0's /a; op 2 is the one that fails.
    const found = check(sse(started, delta({ op: "add", path: "/a", value: {} }, { op: "add", path: "/a/b", value: 1 }, { op: "remove", path: "/gone" }), finished), {});
    expect(found.map((f) => [f.index, stopsHere(f)])).toEqual([[2, true]]);
    // The client stops at an op that applies on its own, after an earlier op took its target away.
    const twice = check(sse(started, delta({ op: "remove", path: "/a" }, { op: "remove", path: "/a" }, { op: "remove", path: "/gone" }), finished), { a: 1 });
    expect(twice.map((f) => [f.index, f.code, stopsHere(f)])).toEqual([
      [1, "PATH_NOT_FOUND", true],
      [2, "PATH_NOT_FOUND", false],
    ]);
  });

  /** A small state and ops drawn over the same few paths, so that many fail. */
  const KEYS = ["a", "b", "c"];
  const pathA = fc.oneof(
    fc.constantFrom(...KEYS).map((k) => `/${k}`),
    fc.tuple(fc.constantFrom(...KEYS), fc.constantFrom("0", "1", "-", "x")).map(([k, s]) => `/${k}/${s}`),
  );
  const value = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constant([] as Json), fc.constant({} as Json));
  const op = fc.oneof(
    fc.record({ op: fc.constantFrom("add", "replace", "test"), path: pathA, value }),
    fc.record({ op: fc.constant("remove"), path: pathA }),
    fc.record({ op: fc.constantFrom("move", "copy"), from: pathA, path: pathA }),
  );
  const state = fc.dictionary(fc.constantFrom(...KEYS), value, { maxKeys: 3 });

  // The ops as the client gets them, parsed from JSON: fast-check may hand two ops the same value
  // object, which structuredClone keeps shared, and fast-json-patch inserts values by reference.
  const asSent = (ops: unknown[]): Operation[] => JSON.parse(JSON.stringify(ops)) as Operation[];

  it("property: the client stops at the first op named; take out every op named and the client applies the rest", () => {
    fc.assert(
      fc.property(state, fc.array(op, { minLength: 1, maxLength: 6 }), (s, ops) => {
        const found = check(sse(started, delta(...ops), finished), s as JsonObject).filter((f) => f.event === 2);
        let fails: number | undefined;
        try {
          jsonpatch.applyPatch(structuredClone(s), asSent(ops), true, false);
        } catch (e) {
          fails = (e as { index?: number }).index ?? -1;
        }
        if (fails === undefined) {
          expect(found).toEqual([]);
          return;
        }
        const named = found.map((f) => f.index);
        expect(found.filter(stopsHere).map((f) => f.index)).toEqual([named[0]]);
        // The ops before the stop applied, so none of them is named.
        const rest = ops.filter((_, i) => !named.includes(i));
        expect(() => jsonpatch.applyPatch(structuredClone(s), asSent(rest), true, false)).not.toThrow();
      }),
      opts,
    );
  });

  it("property: fix reports every op it did not send as itself, each with an outcome, and what it sends applies on the real client", async () => {
    await fc.assert(
      fc.asyncProperty(state, fc.array(op, { minLength: 1, maxLength: 6 }), async (s, ops) => {
        const text = sse(started, delta(...ops), finished);
        const { out, fixer, findings } = fix(text, s as JsonObject);
        const sent = sseBlocks(out)[1];
        const real = await replayThroughClient(sseBlocks(out), s as JsonObject);
        expect(real.warnings).toEqual([]);
        expect(real.state).toEqual(fixer.state);
        if (sent === `data: ${delta(...ops)}\n\n`) return;
        // The delta was changed: each op either went out as itself (in place, in order) or has a finding.
        const reported = new Set(findings.filter((f) => f.event === 2 && f.index !== undefined && f.outcome !== "passed").map((f) => f.index));
        const wire = sent === undefined || !sent.startsWith("data: {") ? [] : ((JSON.parse(sent.slice(6)) as { delta?: unknown[] }).delta ?? []);
        const left = ops.filter((_, i) => !reported.has(i)).map((o) => J(o));
        // What is not reported is sent as it came: every such op is on the wire, in order.
        let at = 0;
        for (const o of left) {
          const k = wire.findIndex((w, j) => j >= at && J(w) === o);
          expect(k, `op ${o} neither reported nor sent as it came`).toBeGreaterThanOrEqual(0);
          at = k + 1;
        }
      }),
      opts,
    );
  });
});

describe("case 3: a snapshot that may replace what the client keeps for itself is named without --state", () => {
  const text = sse(started, snapshot({ n: 1 }), delta({ op: "replace", path: "/n", value: 2 }), snapshot({ n: 3 }), finished);

  it("check without --state: SNAPSHOT_REPLACES_UNKNOWN at the first snapshot, with the hint to use --own; after it the client holds what the stream sent", () => {
    const found = check(text);
    expect(found.map((f) => [f.event, f.kind, f.code])).toEqual([[2, "wiped", "SNAPSHOT_REPLACES_UNKNOWN"]]);
    expect(found[0]?.hint).toContain("fix --own");
  });

  it("check with --state: only members the client holds, precisely (SNAPSHOT_WIPE), or nothing", () => {
    expect(check(text, {})).toEqual([]);
    expect(check(text, { mine: true }).map((f) => [f.event, f.code, f.pointer])).toEqual([[2, "SNAPSHOT_WIPE", "/mine"]]);
  });

  it("fix without --state reports it, outcome passed; with --own or --snapshots delta the snapshot no longer goes whole, and nothing is said", () => {
    const plain = fix(text);
    expect(plain.findings.map((f) => [f.event, f.code, f.outcome])).toEqual([[2, "SNAPSHOT_REPLACES_UNKNOWN", "passed"]]);
    expect(plain.fixer.unfixed).toBe(0);
    expect(fix(text, undefined, { own: [["n"]], snapshots: "pass", joinKeys: false }).findings).toEqual([]);
    expect(fix(text, undefined, { own: [], snapshots: "delta", joinKeys: false }).findings).toEqual([]);
    expect(fix(text, {}).findings).toEqual([]);
  });
});

describe("case 4: a snapshot that is not an object is named at its cause", () => {
  for (const bad of [[1, 2, 3], null, "str"] as Json[]) {
    const text = sse(started, snapshot(bad), delta({ op: "add", path: "/done", value: true }), finished);

    it(`check: ROOT_NOT_OBJECT at the snapshot ${J(bad)}, and a delta that then fails names it as the cause`, () => {
      const found = check(text, { mine: 1 });
      expect(found[0]).toMatchObject({ event: 2, kind: "wiped", type: "STATE_SNAPSHOT", code: "ROOT_NOT_OBJECT", outcome: "passed" });
      for (const f of found.filter((f) => f.event === 3)) expect(f.hint).toContain("since the STATE_SNAPSHOT of event 2");
    });

    it(`fix leaves the snapshot ${J(bad)} out (outcome discarded): the client keeps its object, and the next delta applies on the real client`, async () => {
      const { out, fixer, findings } = fix(text, { mine: 1 });
      expect(findings.map((f) => [f.event, f.code, f.outcome])).toEqual([[2, "ROOT_NOT_OBJECT", "discarded"]]);
      expect(sseBlocks(out)).toEqual([`data: ${started}\n\n`, `data: ${delta({ op: "add", path: "/done", value: true })}\n\n`, `data: ${finished}\n\n`]);
      expect(fixer.state).toEqual({ mine: 1, done: true });
      const real = await replayThroughClient(sseBlocks(out), { mine: 1 });
      expect([real.warnings, real.state]).toEqual([[], { mine: 1, done: true }]);
    });
  }

  it("the delta after a null snapshot fails at the root, and its message says so (the root's pointer is empty)", () => {
    const found = check(sse(started, snapshot(null), delta({ op: "add", path: "/done", value: true }), finished), {});
    expect(found.filter((f) => f.event === 3).map((f) => [f.code, f.message])).toEqual([["PATH_NOT_FOUND", "/done does not exist: the root is not a container; the client warns and keeps its state"]]);
  });

  it("under --own too: the snapshot is left out, and no owned member is removed", () => {
    const { out, findings } = fix(sse(started, snapshot(null), finished), { toolState: { a: 1 } }, { own: [["toolState"]], snapshots: "pass", joinKeys: false });
    expect(findings.map((f) => [f.code, f.outcome])).toEqual([["ROOT_NOT_OBJECT", "discarded"]]);
    expect(sseBlocks(out)).toEqual([`data: ${started}\n\n`, `data: ${finished}\n\n`]);
  });
});

describe("case 7: one word per outcome, everywhere a user reads one", () => {
  const text = sse(started, delta(...CASE_2), finished);

  it("fix --report's lines and summary give the outcome as the word JSON and logs use", () => {
    const { fixer, findings } = fix(text, {});
    const lines = findings.map((f) => formatFinding(f, "fix"));
    expect(lines.map((l) => /as sent, (\w+):/.exec(l)?.[1])).toEqual(["discarded", "mended", "discarded"]);
    const summary = formatSummary(fixer.summary, undefined, fixer.outcomes);
    expect(summary).toMatch(/findings by outcome: 0 passed, 1 mended, 2 discarded, 0 kept$/);
    for (const l of [...lines, summary]) expect(l).not.toMatch(/not sent|sent mended|sent as it came/);
  });

  it("help names the four outcomes by their words, and never by another", () => {
    for (const page of ["fix", "proxy"]) {
      const text = help(page);
      for (const o of OUTCOMES) expect(text).toContain(o);
      expect(text).not.toMatch(/not sent/);
    }
  });

  it("fixStream's reply carries every finding with its outcome, as fix --report has them, and its counts agree", () => {
    const svc = new StreamService({ pipeline: LOADED_PIPELINE });
    const opened = svc.openStream({ state: {}, framing: "sse" });
    if (!opened.ok) throw new Error(J(opened.error));
    const { streamId } = opened.value;
    const reply = svc.fixStream({ streamId, text });
    if (!reply.ok) throw new Error(J(reply.error));
    expect(reply.value.findings).toEqual(fix(text, {}).findings);
    const counts = Object.fromEntries(OUTCOMES.map((o) => [o, reply.value.findings.filter((f) => f.outcome === o).length]));
    expect({ passed: reply.value.passed, mended: reply.value.mended, discarded: reply.value.discarded, kept: reply.value.kept }).toEqual(counts);
    const closed = svc.closeStream({ streamId });
    if (!closed.ok) throw new Error(J(closed.error));
    expect(closed.value.findings).toEqual([]);
  });
});
