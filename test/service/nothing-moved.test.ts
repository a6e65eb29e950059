import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { StateService } from "../../src/service/state-service.js";
import { clientApply } from "../../scripts/harness/agui-client.js";
import { ok } from "../../scripts/harness/outcome.js";

/**
 * Issue 22 §4, protocol/README.md §5 rule 8 and §6: an op that leaves the
 * state (or an activity's content) as it was is not sent, and a call whose ops
 * all leave it so returns `delta: []`, `events: []` and the same version.
 */

const STATE: JsonObject = { a: 1, o: { x: 1, y: [1, { p: 1, q: 2 }] }, list: [7, 7, 8], m: { k: [1] }, n: { k: [1] } };

/** Every kind of op that changes nothing, against STATE. */
const EQUAL_OPS = [
  { op: "replace", path: "/a", value: 1 },
  { op: "add", path: "/a", value: 1 },
  { op: "replace", path: "/o", value: { y: [1, { q: 2, p: 1 }], x: 1 } },
  { op: "replace", path: ["list", 2], value: 8 },
  { op: "move", from: "/o/x", path: "/o/x" },
  { op: "move", from: "/list/0", path: "/list/1" },
  { op: "copy", from: "/m", path: "/n" },
  { op: "copy", from: "/n/k", path: "/n/k" },
  { op: "test", path: "/a", value: 1 },
];

function opened(): StateService {
  const svc = new StateService();
  expect(ok(svc.openRun({ threadId: "t", state: STATE })).version).toBe(1);
  return svc;
}

describe("applyOps", () => {
  for (const atomic of [false, true]) {
    it(`${atomic ? "atomic" : "lenient"}: ops that change nothing give delta [], events [], no skips and the same version, and the mirror keeps its text`, () => {
      const svc = opened();
      const text = JSON.stringify(ok(svc.getState({ threadId: "t" })).state);
      for (const op of EQUAL_OPS) {
        const out = ok(svc.applyOps({ threadId: "t", ops: [op], atomic }));
        expect(out, JSON.stringify(op)).toEqual({ version: 1, delta: [], skipped: [], events: [] });
      }
      expect(ok(svc.applyOps({ threadId: "t", ops: EQUAL_OPS, atomic, ifVersion: 1 }))).toEqual({ version: 1, delta: [], skipped: [], events: [] });
      const after = ok(svc.getState({ threadId: "t" }));
      expect(after.version).toBe(1);
      expect(JSON.stringify(after.state)).toBe(text);
    });
  }

  it("ops that do not apply beside them are skipped as before; atomic mode still fails on them alone", () => {
    const svc = opened();
    const lenient = ok(svc.applyOps({ threadId: "t", ops: [...EQUAL_OPS, { op: "remove", path: "/gone" }] }));
    expect(lenient.skipped.map((s) => [s.index, s.code])).toEqual([[EQUAL_OPS.length, "PATH_NOT_FOUND"]]);
    expect(lenient).toMatchObject({ version: 1, delta: [], events: [] });
    const atomic = svc.applyOps({ threadId: "t", ops: [...EQUAL_OPS, { op: "remove", path: "/gone" }], atomic: true });
    expect(!atomic.ok && atomic.error.data).toMatchObject({ code: "PATH_NOT_FOUND", index: EQUAL_OPS.length });
  });

  it("sends only the ops that move, bumps the version once, and the client lands on getState", async () => {
    const svc = opened();
    const ops = [...EQUAL_OPS, { op: "add", path: "/list/0", value: 7 }, { op: "replace", path: "/a", value: 2 }, { op: "replace", path: "/a", value: 2 }];
    const out = ok(svc.applyOps({ threadId: "t", ops }));
    expect(out.delta).toEqual([
      { op: "add", path: "/list/0", value: 7 },
      { op: "replace", path: "/a", value: 2 },
    ]);
    expect(out.version).toBe(2);
    expect(out.events).toEqual([{ type: "STATE_DELTA", delta: out.delta }]);
    expect(await clientApply(structuredClone(STATE), out.events)).toEqual(ok(svc.getState({ threadId: "t" })).state);
  });

  it("normalize answers the same: delta [], the state as given", () => {
    const svc = new StateService();
    const out = ok(svc.normalize({ ops: EQUAL_OPS, state: STATE }));
    expect(out).toEqual({ delta: [], skipped: [], state: STATE });
    expect(JSON.stringify(out.state)).toBe(JSON.stringify(STATE));
  });
});

describe("activities (protocol/README.md §10)", () => {
  function withActivity(): StateService {
    const svc = opened();
    expect(ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "plan", content: STATE })).version).toBe(2);
    return svc;
  }

  for (const atomic of [false, true]) {
    it(`${atomic ? "atomic" : "lenient"} applyActivityOps: ops that change nothing give delta [], events [] and the same version`, () => {
      const svc = withActivity();
      const out = ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: EQUAL_OPS, atomic }));
      expect(out).toEqual({ version: 2, delta: [], skipped: [], events: [] });
      expect(ok(svc.getActivity({ threadId: "t", messageId: "m" }))).toEqual({ version: 2, activityType: "plan", content: STATE });
    });
  }

  it("a retype with ops that change nothing still counts: one ACTIVITY_DELTA with an empty patch and the new type", () => {
    const svc = withActivity();
    const out = ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: EQUAL_OPS, activityType: "plan-2" }));
    expect(out).toEqual({ version: 3, delta: [], skipped: [], events: [{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan-2", patch: [] }] });
    // The same call again: the type is the one it names now, and nothing moves.
    expect(ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: EQUAL_OPS, activityType: "plan-2" }))).toEqual({ version: 3, delta: [], skipped: [], events: [] });
  });

  it("an activity's equal writes beside a change send only the change", () => {
    const svc = withActivity();
    const out = ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [...EQUAL_OPS, { op: "remove", path: "/n" }] }));
    expect(out.delta).toEqual([{ op: "remove", path: "/n" }]);
    expect(out.version).toBe(3);
    expect(out.events).toEqual([{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan", patch: out.delta }]);
  });
});
