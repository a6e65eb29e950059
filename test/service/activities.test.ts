import { describe, expect, it } from "vitest";
import type { Json, JsonObject } from "../../src/core/index.js";
import type { CallError } from "../../src/protocol/errors.js";
import { toWireError } from "../../src/rpc/common/wire.js";
import { StateService } from "../../src/service/state-service.js";
import { ThreadStore } from "../../src/store/thread-store.js";
import { fail, ok } from "../../scripts/harness/outcome.js";

/**
 * protocol/README.md §10 on StateService in process: activities belong to a
 * thread, share its version and its --max-state-bytes, survive openRun, go
 * with closeThread and eviction, and follow the rules of §4, §5, §8 and §11
 * that a thread's state follows.
 */

/** The JSON-RPC error a call error goes out as. */
const wire = (e: CallError): { code: number; data: unknown } => {
  const w = toWireError(e);
  return { code: w.code, data: w.data };
};

/**
 * The approximate size of §7 for ASCII text without escapes: the compact JSON
 * length plus one per non-empty object or array. Written here, not taken from
 * src/core, so that the check does not share a bug with what it checks.
 */
function approx(v: Json): number {
  const extra = (x: Json): number => {
    if (Array.isArray(x)) return (x.length ? 1 : 0) + x.reduce<number>((a, y) => a + extra(y), 0);
    if (x !== null && typeof x === "object") {
      const vals = Object.values(x);
      return (vals.length ? 1 : 0) + vals.reduce<number>((a, y) => a + extra(y), 0);
    }
    return 0;
  };
  return JSON.stringify(v).length + extra(v);
}

const text = (n: number, c = "x"): JsonObject => ({ s: c.repeat(n) });

function plan(svc: StateService, threadId = "t", messageId = "m", content: JsonObject = { steps: ["a"] }): number {
  return ok(svc.activitySnapshot({ threadId, messageId, activityType: "plan", content })).version;
}

describe("activities share the thread's version", () => {
  it("bumps the version on every change to an activity, and never on a call that changes nothing", () => {
    const svc = new StateService();
    expect(ok(svc.openRun({ threadId: "t", state: { a: 1 } })).version).toBe(1);
    const steps: [string, () => number, number][] = [
      ["create by snapshot", () => ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "plan", content: { steps: [] } })).version, 2],
      ["the same snapshot again", () => ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "plan", content: { steps: [] } })).version, 2],
      ["replace: false on an existing activity", () => ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "x", content: { other: 1 }, replace: false })).version, 2],
      ["a snapshot with new content", () => ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "plan", content: { steps: [1] } })).version, 3],
      ["a snapshot that only retypes", () => ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "plan2", content: { steps: [1] } })).version, 4],
      ["ops that apply", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "add", path: "/steps/-", value: 2 }] })).version, 5],
      // protocol/README.md §5 rule 8 (issue 22): an op that leaves the content as it was is not sent and does not count.
      ["an op that writes an equal value", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "replace", path: "/steps/0", value: 1 }] })).version, 5],
      ["an equal write that retypes still counts (§10)", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "replace", path: "/steps/0", value: 1 }], activityType: "plan2b" })).version, 6],
      ["an equal write with the same type again", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "replace", path: "/steps/0", value: 1 }], activityType: "plan2b" })).version, 6],
      ["ops that are all skipped", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "remove", path: "/nope" }] })).version, 6],
      ["only a test", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "test", path: "/steps/0", value: 1 }] })).version, 6],
      ["no ops, the same type", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [], activityType: "plan2b" })).version, 6],
      ["no ops, a new type", () => ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [], activityType: "plan3" })).version, 7],
      ["diffActivity, equal content", () => ok(svc.diffActivity({ threadId: "t", messageId: "m", content: { steps: [1.0, 2] } })).version, 7],
      ["diffActivity, new content", () => ok(svc.diffActivity({ threadId: "t", messageId: "m", content: { steps: [1, 2, 3] } })).version, 8],
      ["diffActivity, equal content and a new type", () => ok(svc.diffActivity({ threadId: "t", messageId: "m", content: { steps: [1, 2, 3] }, activityType: "plan4" })).version, 9],
      ["diffActivity creating another activity", () => ok(svc.diffActivity({ threadId: "t", messageId: "n", content: {}, activityType: "note" })).version, 10],
      ["a state change bumps the same counter", () => ok(svc.applyOps({ threadId: "t", ops: [{ op: "add", path: "/b", value: 2 }] })).version, 11],
    ];
    for (const [what, call, version] of steps) expect(call(), what).toBe(version);
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" }))).toEqual({ version: 11, activityType: "plan4", content: { steps: [1, 2, 3] } });
    expect(ok(svc.getActivity({ threadId: "t", messageId: "n" })).version).toBe(ok(svc.getState({ threadId: "t" })).version);
  });

  it("refuses a stale ifVersion with -32004 on every activity method, and changes nothing", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: {} }));
    const v = plan(svc);
    const stale = { ifVersion: v - 1 };
    const conflict = { code: -32004, data: { code: "VERSION_CONFLICT", expected: v - 1, actual: v } };
    expect(wire(fail(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "x", content: { z: 1 }, ...stale })))).toEqual(conflict);
    expect(wire(fail(svc.activitySnapshot({ threadId: "t", messageId: "new", activityType: "x", content: {}, replace: false, ...stale })))).toEqual(conflict);
    expect(wire(fail(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "add", path: "/z", value: 1 }], activityType: "x", ...stale })))).toEqual(conflict);
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m", content: { z: 1 }, activityType: "x", ...stale })))).toEqual(conflict);
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "new", content: {}, activityType: "x", ...stale })))).toEqual(conflict);
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" }))).toEqual({ version: v, activityType: "plan", content: { steps: ["a"] } });
    expect(wire(fail(svc.getActivity({ threadId: "t", messageId: "new" }))).code).toBe(-32005);
    // The current version passes.
    expect(ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "add", path: "/z", value: 1 }], ifVersion: v })).version).toBe(v + 1);
    expect(ok(svc.diffActivity({ threadId: "t", messageId: "m", content: {}, ifVersion: v + 1 })).version).toBe(v + 2);
    expect(ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "p", content: {}, ifVersion: v + 2 })).version).toBe(v + 3);
  });
});

describe("activities live and die with their thread", () => {
  it("survive openRun: with a new state, with a snapshot, and in namespace mode", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { a: 1 } }));
    plan(svc);
    const snapshot = ok(svc.openRun({ threadId: "t", state: { a: 2 }, snapshot: true }));
    // openRun sends state events only: the client keeps its activities, and so does the mirror.
    expect(snapshot.events.map((e) => e.type)).toEqual(["STATE_SNAPSHOT"]);
    ok(svc.openRun({ threadId: "t", toolState: { k: 1 } }));
    ok(svc.openRun({ threadId: "t" }));
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" }))).toEqual({ version: 4, activityType: "plan", content: { steps: ["a"] } });
    // An openRun that changes nothing leaves the version too.
    expect(ok(svc.openRun({ threadId: "t", state: { a: 2, toolState: { k: 1 } } })).version).toBe(4);
  });

  it("go with closeThread: a reopened thread starts without them", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t" }));
    plan(svc, "t", "m1");
    plan(svc, "t", "m2");
    ok(svc.openRun({ threadId: "u" }));
    plan(svc, "u", "m1");
    expect(ok(svc.stats(0)).activities).toBe(3);
    expect(ok(svc.closeThread({ threadId: "t" }))).toEqual({ closed: true });
    expect(ok(svc.stats(0)).activities).toBe(1);
    expect(wire(fail(svc.getActivity({ threadId: "t", messageId: "m1" })))).toEqual({ code: -32001, data: { code: "UNKNOWN_THREAD", threadId: "t", reason: "closed" } });
    expect(wire(fail(svc.activitySnapshot({ threadId: "t", messageId: "m1", activityType: "p", content: {} }))).code).toBe(-32001);
    expect(wire(fail(svc.applyActivityOps({ threadId: "t", messageId: "m1", ops: [] }))).code).toBe(-32001);
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m1", content: {}, activityType: "p" }))).code).toBe(-32001);
    ok(svc.openRun({ threadId: "t" }));
    expect(wire(fail(svc.getActivity({ threadId: "t", messageId: "m1" })))).toEqual({ code: -32005, data: { code: "UNKNOWN_ACTIVITY", threadId: "t", messageId: "m1" } });
    expect(ok(svc.getActivity({ threadId: "u", messageId: "m1" })).content).toEqual({ steps: ["a"] });
  });

  it("go with eviction past maxThreads, and heap shedding counts their bytes", () => {
    const store = new ThreadStore(2);
    const svc = new StateService({ limits: { maxThreads: 2 }, store });
    ok(svc.openRun({ threadId: "a" }));
    plan(svc, "a");
    ok(svc.openRun({ threadId: "b" }));
    ok(svc.openRun({ threadId: "c" })); // evicts a
    expect(wire(fail(svc.getActivity({ threadId: "a", messageId: "m" })))).toEqual({ code: -32001, data: { code: "UNKNOWN_THREAD", threadId: "a", reason: "evicted" } });
    expect(ok(svc.stats(0))).toMatchObject({ threads: 2, activities: 0, evicted: 1 });
    ok(svc.openRun({ threadId: "a" })); // evicts b
    expect(wire(fail(svc.applyActivityOps({ threadId: "a", messageId: "m", ops: [] }))).code).toBe(-32005);

    // A thread whose bytes are all in an activity is what shedding frees.
    ok(svc.activitySnapshot({ threadId: "c", messageId: "big", activityType: "log", content: text(5000) }));
    ok(svc.getState({ threadId: "a" })); // c is now the least recently used
    const before = svc.stateBytes();
    expect(svc.shed(1)).toEqual(["c"]);
    expect(before - svc.stateBytes()).toBe(approx({}) + approx(text(5000)));
  });

  it("reports stats.activities over live threads, and counts their content in stateBytes", () => {
    const svc = new StateService();
    expect(ok(svc.stats(0)).activities).toBe(0);
    ok(svc.openRun({ threadId: "t", state: { a: "abc" } }));
    ok(svc.openRun({ threadId: "u", state: {} }));
    plan(svc, "t", "m1", { steps: ["a", "b"] });
    plan(svc, "t", "m2", {});
    plan(svc, "u", "m1", { n: { k: [1] } });
    const s = ok(svc.stats(0));
    expect(s.activities).toBe(3);
    expect(s.stateBytes).toBe(approx({ a: "abc" }) + approx({}) + approx({ steps: ["a", "b"] }) + approx({}) + approx({ n: { k: [1] } }));
    // replace: false on an existing one adds nothing.
    ok(svc.activitySnapshot({ threadId: "t", messageId: "m1", activityType: "p", content: text(100), replace: false }));
    expect(ok(svc.stats(0))).toMatchObject({ activities: 3, stateBytes: s.stateBytes });
  });
});

describe("activities count toward --max-state-bytes with the state", () => {
  const LIMIT = 1000;
  /** A thread whose state takes 409 bytes and whose activity "a" takes 409: 818 of 1000. */
  function full(): StateService {
    const svc = new StateService({ limits: { maxStateBytes: LIMIT } });
    ok(svc.openRun({ threadId: "t", state: text(400, "s") }));
    ok(svc.activitySnapshot({ threadId: "t", messageId: "a", activityType: "p", content: text(400, "a") }));
    expect(svc.stateBytes()).toBe(818);
    return svc;
  }
  /** -32003 for maxStateBytes, with the thread's figures: the limit, and at least what the thread would have passed it by. */
  const overLimit = (e: CallError): void => {
    const w = wire(e);
    expect(w).toMatchObject({ code: -32003, data: { code: "LIMIT_EXCEEDED", limit: "maxStateBytes", max: LIMIT } });
    expect((w.data as { actual: number }).actual).toBeGreaterThan(LIMIT);
  };
  function unchanged(svc: StateService, version: number): void {
    expect(ok(svc.getState({ threadId: "t" }))).toEqual({ version, state: text(400, "s") });
    expect(ok(svc.getActivity({ threadId: "t", messageId: "a" }))).toEqual({ version, activityType: "p", content: text(400, "a") });
    expect(ok(svc.stats(0))).toMatchObject({ stateBytes: 818, activities: 1 });
  }

  it("refuses an activity that would take the thread past the limit with -32003, and nothing changes", () => {
    const svc = full();
    // 209 more bytes would make 1027.
    overLimit(fail(svc.activitySnapshot({ threadId: "t", messageId: "b", activityType: "p", content: text(200) })));
    overLimit(fail(svc.activitySnapshot({ threadId: "t", messageId: "b", activityType: "p", content: text(200), replace: false })));
    overLimit(fail(svc.diffActivity({ threadId: "t", messageId: "b", activityType: "p", content: text(200) })));
    expect(wire(fail(svc.getActivity({ threadId: "t", messageId: "b" }))).code).toBe(-32005);
    // Growing the existing one past it: by snapshot, and by diff.
    overLimit(fail(svc.activitySnapshot({ threadId: "t", messageId: "a", activityType: "q", content: text(600, "a") })));
    overLimit(fail(svc.diffActivity({ threadId: "t", messageId: "a", activityType: "q", content: text(600, "a") })));
    unchanged(svc, 2);
  });

  it("skips an activity op past the limit with LIMIT_EXCEEDED, and atomic mode fails it with -32002", () => {
    const svc = full();
    const r = ok(svc.applyActivityOps({ threadId: "t", messageId: "a", ops: [{ op: "add", path: "/more", value: "m".repeat(300) }, { op: "copy", from: "/s", path: "/copy" }] }));
    expect(r.skipped.map((s) => s.code)).toEqual(["LIMIT_EXCEEDED", "LIMIT_EXCEEDED"]);
    expect(r).toMatchObject({ version: 2, delta: [], events: [] });
    const e = wire(fail(svc.applyActivityOps({ threadId: "t", messageId: "a", atomic: true, activityType: "q", ops: [{ op: "add", path: "/ok", value: 1 }, { op: "add", path: "/more", value: "m".repeat(300) }] })));
    expect(e).toMatchObject({ code: -32002, data: { code: "LIMIT_EXCEEDED", index: 1 } });
    unchanged(svc, 2);
  });

  it("gives a replaced or diffed activity the room its old content held", () => {
    const svc = full();
    // 589 bytes in place of the 409: 998, which fits only if the old content no longer counts.
    ok(svc.activitySnapshot({ threadId: "t", messageId: "a", activityType: "p", content: text(580, "a") }));
    expect(svc.stateBytes()).toBe(409 + 589);
    // Exactly at the limit is within it; one byte more is past it.
    ok(svc.diffActivity({ threadId: "t", messageId: "a", content: text(582, "b") }));
    expect(svc.stateBytes()).toBe(LIMIT);
    overLimit(fail(svc.diffActivity({ threadId: "t", messageId: "a", content: text(583, "c") })));
    overLimit(fail(svc.activitySnapshot({ threadId: "t", messageId: "a", activityType: "p", content: text(583, "c") })));
    expect(ok(svc.getActivity({ threadId: "t", messageId: "a" })).content).toEqual(text(582, "b"));
  });

  it("refuses a state change when activities hold the room: skips in applyOps, -32003 elsewhere", () => {
    const svc = full();
    ok(svc.activitySnapshot({ threadId: "t", messageId: "b", activityType: "p", content: text(150) }));
    expect(svc.stateBytes()).toBe(818 + 159);
    const skip = ok(svc.applyOps({ threadId: "t", ops: [{ op: "add", path: "/big", value: "q".repeat(100) }] }));
    expect(skip.skipped.map((s) => s.code)).toEqual(["LIMIT_EXCEEDED"]);
    overLimit(fail(svc.diffState({ threadId: "t", path: "/s", value: "s".repeat(450) })));
    overLimit(fail(svc.openRun({ threadId: "t", state: text(450, "s") })));
    overLimit(fail(svc.openRun({ threadId: "t", toolState: { k: "q".repeat(100) } })));
    expect(ok(svc.getState({ threadId: "t" }))).toEqual({ version: 3, state: text(400, "s") });
    // Once the activities shrink, the same change fits.
    ok(svc.diffActivity({ threadId: "t", messageId: "a", content: {} }));
    ok(svc.diffActivity({ threadId: "t", messageId: "b", content: {} }));
    expect(ok(svc.applyOps({ threadId: "t", ops: [{ op: "add", path: "/big", value: "q".repeat(100) }] })).skipped).toEqual([]);
    expect(ok(svc.openRun({ threadId: "t", state: text(450, "s") })).version).toBe(7);
  });

  it("refuses content nested past maxDepth with -32003", () => {
    const svc = new StateService({ limits: { maxDepth: 4 } });
    ok(svc.openRun({ threadId: "t" }));
    const deep: JsonObject = { a: { b: { c: { d: {} } } } };
    expect(wire(fail(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "p", content: deep })))).toMatchObject({ code: -32003, data: { limit: "maxDepth", max: 4 } });
    plan(svc, "t", "m", { a: { b: {} } });
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m", content: deep })))).toMatchObject({ code: -32003, data: { limit: "maxDepth" } });
    expect(ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "add", path: "/a/b/c", value: { d: {} } }] })).skipped.map((s) => s.code)).toEqual(["LIMIT_EXCEEDED"]);
  });
});

describe("activity calls follow the rules of the state", () => {
  it("atomic mode: the first skip fails the call with -32002, and neither content nor type nor version moves", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t" }));
    const v = plan(svc);
    const e = wire(fail(svc.applyActivityOps({ threadId: "t", messageId: "m", atomic: true, activityType: "other", ops: [{ op: "add", path: "/x", value: 1 }, { op: "test", path: "/steps/0", value: "b" }] })));
    expect(e).toMatchObject({ code: -32002, data: { code: "TEST_FAILED", index: 1 } });
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" }))).toEqual({ version: v, activityType: "plan", content: { steps: ["a"] } });
    // All of them apply: one delta, one event, the new type.
    const r = ok(svc.applyActivityOps({ threadId: "t", messageId: "m", atomic: true, activityType: "other", ops: [{ op: "add", path: "/x", value: 1 }, { op: "test", path: "/steps/0", value: "a" }] }));
    expect(r).toEqual({ version: v + 1, delta: [{ op: "add", path: "/x", value: 1 }], skipped: [], events: [{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "other", patch: [{ op: "add", path: "/x", value: 1 }] }] });
  });

  it("skips ops that would leave the content something other than an object with ROOT_NOT_OBJECT", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t" }));
    plan(svc, "t", "m", { n: 1, list: [1], o: { k: 1 } });
    const r = ok(
      svc.applyActivityOps({
        threadId: "t",
        messageId: "m",
        ops: [
          { op: "replace", path: "", value: [1] },
          { op: "add", path: "", value: "s" },
          { op: "remove", path: "" },
          { op: "move", from: "/n", path: "" },
          { op: "copy", from: "/list", path: "" },
          { op: "replace", path: [], value: null },
          { op: "move", from: "/o", path: "" }, // an object onto the root: allowed, sent as member ops
        ],
      }),
    );
    expect(r.skipped.map((s) => [s.index, s.code])).toEqual([
      [0, "ROOT_NOT_OBJECT"],
      [1, "ROOT_NOT_OBJECT"],
      [2, "ROOT_NOT_OBJECT"],
      [3, "ROOT_NOT_OBJECT"],
      [4, "ROOT_NOT_OBJECT"],
      [5, "ROOT_NOT_OBJECT"],
    ]);
    expect(r.delta.every((o) => o.path !== "" && ("from" in o ? o.from !== "" : true))).toBe(true);
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" })).content).toEqual({ k: 1 });
    expect(wire(fail(svc.applyActivityOps({ threadId: "t", messageId: "m", atomic: true, ops: [{ op: "remove", path: "" }] })))).toMatchObject({ code: -32002, data: { code: "ROOT_NOT_OBJECT", index: 0 } });
  });

  it("refuses content that is not an object with -32602 ROOT_NOT_OBJECT at /content", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t" }));
    plan(svc);
    const bad: Json[] = [[1, 2], "s", 1, null, true, []];
    for (const content of bad) {
      const want = { code: -32602, data: { code: "INVALID_PARAMS", field: "/content", reason: "ROOT_NOT_OBJECT" } };
      expect(wire(fail(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "p", content }))), JSON.stringify(content)).toEqual(want);
      expect(wire(fail(svc.activitySnapshot({ threadId: "t", messageId: "new", activityType: "p", content }))), JSON.stringify(content)).toEqual(want);
      expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m", content }))), JSON.stringify(content)).toEqual(want);
      expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "new", activityType: "p", content }))), JSON.stringify(content)).toEqual(want);
    }
    expect(ok(svc.stats(0)).activities).toBe(1);
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" })).version).toBe(1);
  });

  it("needs activityType to create an activity with diffActivity (MISSING), and creates nothing without it", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { a: 1 } }));
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m", content: { x: 1 } })))).toEqual({ code: -32602, data: { code: "INVALID_PARAMS", field: "/activityType", reason: "MISSING" } });
    expect(wire(fail(svc.getActivity({ threadId: "t", messageId: "m" }))).code).toBe(-32005);
    expect(ok(svc.getState({ threadId: "t" })).version).toBe(1);
    // With it: created, a snapshot (no delta: the client has no baseline), version +1.
    expect(ok(svc.diffActivity({ threadId: "t", messageId: "m", content: { x: 1 }, activityType: "p" }))).toEqual({ version: 2, delta: [], events: [{ type: "ACTIVITY_SNAPSHOT", messageId: "m", activityType: "p", content: { x: 1 } }] });
    // Later, the type may be left out: it stays.
    expect(ok(svc.diffActivity({ threadId: "t", messageId: "m", content: { x: 2 } })).events).toEqual([{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "p", patch: [{ op: "replace", path: "/x", value: 2 }] }]);
  });

  it("refuses with FORBIDDEN_KEY a diffActivity that would change a root __proto__ member, and replaces a nested one whole", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t" }));
    const withProto = (v: Json, rest: JsonObject = {}): JsonObject => JSON.parse(`{"__proto__":${JSON.stringify(v)}${Object.keys(rest).length ? "," + JSON.stringify(rest).slice(1, -1) : ""}}`) as JsonObject;
    plan(svc, "t", "m", withProto({ x: 1 }, { a: 1 }));
    const forbidden = { code: -32602, data: { code: "INVALID_PARAMS", field: "/content", reason: "FORBIDDEN_KEY" } };
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m", content: withProto({ x: 2 }, { a: 1 }) })))).toEqual(forbidden); // changed
    expect(wire(fail(svc.diffActivity({ threadId: "t", messageId: "m", content: { a: 1 } })))).toEqual(forbidden); // removed
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" })).version).toBe(1);
    // Left as it is, the member is plain data: the rest diffs as usual.
    const kept = ok(svc.diffActivity({ threadId: "t", messageId: "m", content: withProto({ x: 1 }, { a: 2 }), activityType: "retyped" }));
    expect(kept).toEqual({ version: 2, delta: [{ op: "replace", path: "/a", value: 2 }], events: [{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "retyped", patch: [{ op: "replace", path: "/a", value: 2 }] }] });
    // Below the root, the object holding a changed __proto__ member goes whole, the member as plain data.
    ok(svc.diffActivity({ threadId: "t", messageId: "n", activityType: "p", content: { o: withProto({ x: 1 }, { k: 1 }) } }));
    const nested = ok(svc.diffActivity({ threadId: "t", messageId: "n", content: { o: withProto({ x: 2 }, { k: 1 }) } }));
    expect(nested.delta.map((o) => [o.op, o.path])).toEqual([["replace", "/o"]]);
    const o = ok(svc.getActivity({ threadId: "t", messageId: "n" })).content["o"] as JsonObject;
    expect(Object.keys(o)).toEqual(["__proto__", "k"]);
    expect(Object.getPrototypeOf(o)).toBe(Object.prototype);
    expect(JSON.stringify(o)).toBe('{"__proto__":{"x":2},"k":1}');
  });

  it("fails with -32005 for an activity the thread does not hold, -32001 for a thread that does not exist, -32003 past maxOps", () => {
    const svc = new StateService({ limits: { maxOps: 2 } });
    ok(svc.openRun({ threadId: "t" }));
    expect(wire(fail(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [] })))).toEqual({ code: -32005, data: { code: "UNKNOWN_ACTIVITY", threadId: "t", messageId: "m" } });
    expect(wire(fail(svc.getActivity({ threadId: "t", messageId: "m" })))).toEqual({ code: -32005, data: { code: "UNKNOWN_ACTIVITY", threadId: "t", messageId: "m" } });
    const never = { code: -32001, data: { code: "UNKNOWN_THREAD", threadId: "x", reason: "never opened" } };
    expect(wire(fail(svc.activitySnapshot({ threadId: "x", messageId: "m", activityType: "p", content: {} })))).toEqual(never);
    expect(wire(fail(svc.applyActivityOps({ threadId: "x", messageId: "m", ops: [] })))).toEqual(never);
    expect(wire(fail(svc.diffActivity({ threadId: "x", messageId: "m", activityType: "p", content: {} })))).toEqual(never);
    expect(wire(fail(svc.getActivity({ threadId: "x", messageId: "m" })))).toEqual(never);
    // The op count is a limit on the params, checked before the thread (§6, the order of checks).
    const three = [{ op: "add", path: "/a", value: 1 }, { op: "add", path: "/b", value: 1 }, { op: "add", path: "/c", value: 1 }];
    expect(wire(fail(svc.applyActivityOps({ threadId: "x", messageId: "m", ops: three })))).toEqual({ code: -32003, data: { code: "LIMIT_EXCEEDED", limit: "maxOps", max: 2, actual: 3 } });
    expect(svc.stateBytes()).toBe(approx({}));
  });

  it("copies content in and out by default: later changes to params or results never reach the mirror", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t" }));
    const content = { steps: [{ title: "a" }] };
    ok(svc.activitySnapshot({ threadId: "t", messageId: "m", activityType: "p", content }));
    content.steps.push({ title: "b" });
    const value = { deep: [1] };
    ok(svc.applyActivityOps({ threadId: "t", messageId: "m", ops: [{ op: "add", path: "/v", value }] }));
    value.deep.push(2);
    const read = ok(svc.getActivity({ threadId: "t", messageId: "m" }));
    (read.content["steps"] as Json[]).push("c");
    const target = { steps: [{ title: "z" }] };
    const diff = ok(svc.diffActivity({ threadId: "t", messageId: "m", content: target }));
    target.steps.push({ title: "y" });
    expect(diff.events).toHaveLength(1);
    expect(ok(svc.getActivity({ threadId: "t", messageId: "m" })).content).toEqual({ steps: [{ title: "z" }] });
  });
});
