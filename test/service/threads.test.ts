import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isObject, type Json } from "../../src/core/index.js";
import type { CallError } from "../../src/protocol/errors.js";
import { toWireError } from "../../src/rpc/common/wire.js";
import { StateService } from "../../src/service/state-service.js";
import { ThreadStore } from "../../src/store/thread-store.js";
import { fail, ok } from "../../scripts/harness/outcome.js";

/** The JSON-RPC code a call error goes out with. */
const codeOf = (e: CallError): number => toWireError(e).code;
/** `data.reason` of the errors that have one. */
const reasonOf = (e: CallError): string | undefined => ("reason" in e.data ? e.data.reason : undefined);

describe("threads", () => {
  it("evicts the least recently used thread past maxThreads; use counts as recent", () => {
    const store = new ThreadStore(2);
    const svc = new StateService({ limits: { maxThreads: 2 }, store });
    ok(svc.openRun({ threadId: "a" }));
    ok(svc.openRun({ threadId: "b" }));
    ok(svc.getState({ threadId: "a" })); // a is now the most recently used
    ok(svc.openRun({ threadId: "c" })); // evicts b
    expect(fail(svc.getState({ threadId: "b" })).data).toEqual({ code: "UNKNOWN_THREAD", threadId: "b", reason: "evicted" });
    expect(ok(svc.getState({ threadId: "a" })).version).toBe(0);
    expect(store.evicted).toBe(1);
    expect(ok(svc.stats(0)).evicted).toBe(1);
  });

  it("keeps least-recently-used order exactly, however calls on one thread run back to back (the store skips moving the newest)", () => {
    // A reference LRU (an array, oldest first) against the store, over random opens, uses, closes and sheds.
    const step = fc.oneof(
      fc.record({ kind: fc.constant("open" as const), id: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ kind: fc.constant("get" as const), id: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ kind: fc.constant("close" as const), id: fc.integer({ min: 0, max: 5 }) }),
      fc.record({ kind: fc.constant("shed" as const), id: fc.integer({ min: 1, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const store = new ThreadStore(3);
        let order: string[] = [];
        const use = (id: string): void => {
          order = [...order.filter((x) => x !== id), id];
        };
        for (const s of steps) {
          const id = `t${s.id}`;
          if (s.kind === "open") {
            if (!order.includes(id) && order.length >= 3) order.shift();
            store.open(id);
            use(id);
          } else if (s.kind === "get") {
            expect(store.get(id).ok).toBe(order.includes(id));
            if (order.includes(id)) use(id);
          } else if (s.kind === "close") {
            expect(store.close(id)).toBe(order.includes(id));
            order = order.filter((x) => x !== id);
          } else {
            // Every thread is 2 bytes ({}), so shedding 2 × n bytes evicts the n oldest, keeping the newest.
            const evicted = store.shed(2 * s.id);
            const expected = order.slice(0, Math.min(s.id, Math.max(0, order.length - 1)));
            expect(evicted).toEqual(expected);
            order = order.slice(expected.length);
          }
          expect(store.size).toBe(order.length);
        }
      }),
      { numRuns: 500 },
    );
  });

  it("tells closed, evicted and never-opened threads apart", () => {
    const svc = new StateService({ limits: { maxThreads: 1 } });
    ok(svc.openRun({ threadId: "x" }));
    expect(ok(svc.closeThread({ threadId: "x" }))).toEqual({ closed: true });
    expect(ok(svc.closeThread({ threadId: "x" }))).toEqual({ closed: false });
    expect(reasonOf(fail(svc.applyOps({ threadId: "x", ops: [] })))).toBe("closed");
    ok(svc.openRun({ threadId: "y" }));
    ok(svc.openRun({ threadId: "z" }));
    expect(reasonOf(fail(svc.diffState({ threadId: "y", value: 1 })))).toBe("evicted");
    const e = fail(svc.diffToolState({ threadId: "never", set: {} }));
    expect(toWireError(e)).toMatchObject({ code: -32001, data: { reason: "never opened", threadId: "never" } });
  });

  it("reopens a closed id as a new thread at version 0", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "x", state: { a: 1 } }));
    ok(svc.closeThread({ threadId: "x" }));
    expect(ok(svc.openRun({ threadId: "x" })).version).toBe(0);
    expect(ok(svc.getState({ threadId: "x" })).state).toEqual({});
  });

  it("counts versions: +1 per call that changed the state, none for silent calls", () => {
    const svc = new StateService();
    expect(ok(svc.openRun({ threadId: "t" })).version).toBe(0);
    expect(ok(svc.openRun({ threadId: "t", toolState: { a: 1 } })).version).toBe(1);
    expect(ok(svc.openRun({ threadId: "t", toolState: { a: 1 } })).version).toBe(1);
    expect(ok(svc.diffToolState({ threadId: "t", set: { a: 2, b: 1 } })).version).toBe(2);
    expect(ok(svc.diffToolState({ threadId: "t", set: { a: 2 } })).version).toBe(2);
  });

  it("refuses a call whose ifVersion differs with VERSION_CONFLICT and changes nothing", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", toolState: {} }));
    const e = fail(svc.diffToolState({ threadId: "t", set: { a: 1 }, ifVersion: 0 }));
    expect(toWireError(e)).toMatchObject({ code: -32004, data: { code: "VERSION_CONFLICT", expected: 0, actual: 1 } });
    expect(ok(svc.getState({ threadId: "t" }))).toEqual({ version: 1, state: { toolState: {} } });
    expect(codeOf(fail(svc.applyOps({ threadId: "t", ops: [{ op: "add", path: "/x", value: 1 }], ifVersion: 7 })))).toBe(-32004);
    expect(codeOf(fail(svc.diffState({ threadId: "t", value: {}, ifVersion: 2 })))).toBe(-32004);
    expect(codeOf(fail(svc.openRun({ threadId: "t", state: {}, ifVersion: 3 })))).toBe(-32004);
    expect(ok(svc.diffToolState({ threadId: "t", set: { a: 1 }, ifVersion: 1 })).version).toBe(2);
  });

  it("refuses a call past maxStateBytes with LIMIT_EXCEEDED; the thread and its neighbours are unchanged", () => {
    const store = new ThreadStore(10);
    const svc = new StateService({ limits: { maxStateBytes: 10_000 }, store });
    ok(svc.openRun({ threadId: "big", toolState: { a: "x".repeat(5000) } }));
    ok(svc.openRun({ threadId: "other", toolState: { k: 1 } }));
    const before = ok(svc.getState({ threadId: "big" }));
    const e = fail(svc.diffToolState({ threadId: "big", set: { b: "y".repeat(6000) } }));
    expect(toWireError(e)).toMatchObject({ code: -32003, data: { code: "LIMIT_EXCEEDED", limit: "maxStateBytes", max: 10_000 } });
    expect(ok(svc.getState({ threadId: "big" }))).toEqual(before);
    expect(ok(svc.getState({ threadId: "other" }))).toEqual({ version: 1, state: { toolState: { k: 1 } } });
    const skip = ok(svc.applyOps({ threadId: "big", ops: [{ op: "add", path: "/c", value: "z".repeat(6000) }] }));
    expect(skip.skipped.map((s) => s.code)).toEqual(["LIMIT_EXCEEDED"]);
    expect(codeOf(fail(svc.openRun({ threadId: "big", state: { s: "q".repeat(20_000) } })))).toBe(-32003);
    expect(ok(svc.getState({ threadId: "big" }))).toEqual(before);
    // A refused openRun of a new thread neither creates it nor evicts anyone.
    expect(codeOf(fail(svc.openRun({ threadId: "new", state: { s: "q".repeat(20_000) } })))).toBe(-32003);
    expect(reasonOf(fail(svc.getState({ threadId: "new" })))).toBe("never opened");
    expect(store.size).toBe(2);
  });

  it("reports stats: threads, approximate state bytes, requests, uptime, limits and version", () => {
    let clock = 1000;
    const svc = new StateService({ version: "9.9.9", now: () => clock, limits: { maxThreads: 5 } });
    ok(svc.openRun({ threadId: "a", state: { s: "abc" } }));
    ok(svc.openRun({ threadId: "b", state: { x: [1, 2] } }));
    clock += 250;
    const s = ok(svc.stats(3));
    expect(s).toEqual({ threads: 2, stateBytes: JSON.stringify({ s: "abc" }).length + 1 + JSON.stringify({ x: [1, 2] }).length + 2, requests: 3, uptimeMs: 250, limits: { ...svc.limits }, version: "9.9.9", evicted: 0, activities: 0, streams: 0, streamsEvicted: 0, runs: 0, runBytes: 0, runsEvicted: 0, reads: 0 });
    expect(s.limits.maxThreads).toBe(5);
    // The stream service's counts (protocol/README.md §14) are reported as given.
    expect(ok(svc.stats(4, { streams: 2, streamsEvicted: 7, runs: 3, runBytes: 100, runsEvicted: 1, reads: 4 }))).toMatchObject({ streams: 2, streamsEvicted: 7, runs: 3, runBytes: 100, runsEvicted: 1, reads: 4 });
  });
});

describe("namespace mode errors", () => {
  it("refuses diffToolState on a thread not in namespace mode", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: {} }));
    expect(fail(svc.diffToolState({ threadId: "t", set: { a: 1 } })).data).toMatchObject({ reason: "NOT_NAMESPACE_MODE" });
  });
  it("refuses namespace mode on a root that is not an object", () => {
    const svc = new StateService();
    expect(fail(svc.openRun({ threadId: "t", state: [1], toolState: {} })).data).toMatchObject({ field: "/state", reason: "ROOT_NOT_OBJECT" });
  });
  it("refuses mixing toolState with set/remove, and a key in both set and remove", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", toolState: {} }));
    expect(fail(svc.diffToolState({ threadId: "t", toolState: {}, set: {} })).data).toMatchObject({ reason: "CONFLICTING_PARAMS" });
    expect(fail(svc.diffToolState({ threadId: "t", set: { k: 1 }, remove: ["k"] })).data).toMatchObject({ reason: "CONFLICTING_PARAMS", field: "/remove/0" });
  });
  it("refuses diffToolState once applyOps has replaced the namespace with a non-object, until openRun", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", toolState: { a: 1 } }));
    ok(svc.applyOps({ threadId: "t", ops: [{ op: "replace", path: "/toolState", value: 5 }] }));
    expect(fail(svc.diffToolState({ threadId: "t", set: { b: 1 } })).data).toMatchObject({ reason: "NAMESPACE_NOT_OBJECT" });
    ok(svc.openRun({ threadId: "t", toolState: { a: 1 } }));
    expect(ok(svc.diffToolState({ threadId: "t", set: { b: 1 } })).delta).toHaveLength(1);
  });
});

describe("pointer helpers", () => {
  it("escapes a path and parses a pointer, refusing a malformed one", () => {
    const svc = new StateService();
    expect(ok(svc.escapePointer({ path: ["toolState", "raster-ops/dataset", 0] }))).toEqual({ pointer: "/toolState/raster-ops~1dataset/0" });
    expect(ok(svc.parsePointer({ pointer: "/a~1b/~01" }))).toEqual({ path: ["a/b", "~1"] });
    expect(fail(svc.parsePointer({ pointer: "/~2" })).data).toMatchObject({ code: "INVALID_PARAMS", field: "/pointer", reason: "INVALID_POINTER" });
  });
});

describe("ownsInput", () => {
  it("keeps the given state and map values without copying them when the caller hands them over", () => {
    const store = new ThreadStore(10);
    const svc = new StateService({ ownsInput: true, store });
    const state = { big: { rows: [1, 2, 3] } };
    const value = { deep: [1] };
    ok(svc.openRun({ threadId: "t", state, toolState: {} }));
    ok(svc.diffToolState({ threadId: "t", set: { k: value } }));
    // The store's own mirror, not a copy: the member the service kept must be the very object given.
    const member = (root: Json | undefined, key: string): Json | undefined => (isObject(root) ? root[key] : undefined);
    const thread = store.get("t");
    const mirror = thread.ok ? thread.value.doc.root : undefined;
    expect(member(mirror, "big")).toBe(state.big);
    expect(member(member(mirror, "toolState"), "k")).toBe(value);
  });
  it("copies by default, so an in-process caller's later changes never reach the mirror", () => {
    const svc = new StateService();
    const state = { big: { rows: [1, 2, 3] } };
    ok(svc.openRun({ threadId: "t", state }));
    state.big.rows.push(4);
    expect(ok(svc.getState({ threadId: "t", path: "/big/rows" })).state).toEqual([1, 2, 3]);
  });
});
