import { describe, expect, it } from "vitest";
import { toWireError } from "../../src/rpc/common/wire.js";
import { StateService } from "../../src/service/state-service.js";
import { ThreadStore } from "../../src/store/thread-store.js";
import { clientApply } from "../../scripts/harness/agui-client.js";
import { fail, ok } from "../../scripts/harness/outcome.js";

function opened(state = {}) {
  const svc = new StateService();
  ok(svc.openRun({ threadId: "t", state }));
  return svc;
}

describe("applyOps with model-style input", () => {
  it("inserts add /todos [] before add /todos/- when there is no todos, and the client applies it", async () => {
    const svc = opened({ mine: 1 });
    const out = ok(svc.applyOps({ threadId: "t", ops: [{ op: "add", path: "/todos/-", value: { text: "milk" } }] }));
    expect(out.delta).toEqual([
      { op: "add", path: "/todos", value: [] },
      { op: "add", path: "/todos/-", value: { text: "milk" } },
    ]);
    expect(out.skipped).toEqual([]);
    expect(out.events).toEqual([{ type: "STATE_DELTA", delta: out.delta }]);
    expect(await clientApply({ mine: 1 }, out.events)).toEqual(ok(svc.getState({ threadId: "t" })).state);
  });

  it("turns a replace of a missing key into add", () => {
    const svc = opened();
    const out = ok(svc.applyOps({ threadId: "t", ops: [{ op: "replace", path: "/status", value: "busy" }] }));
    expect(out.delta).toEqual([{ op: "add", path: "/status", value: "busy" }]);
  });

  it("skips a remove of a missing key with PATH_NOT_FOUND and applies the rest", () => {
    const svc = opened({ a: 1 });
    const out = ok(svc.applyOps({ threadId: "t", ops: [{ op: "remove", path: "/gone" }, { op: "remove", path: "/a" }] }));
    expect(out.skipped).toEqual([{ index: 0, op: { op: "remove", path: "/gone" }, code: "PATH_NOT_FOUND", message: expect.any(String) }]);
    expect(out.delta).toEqual([{ op: "remove", path: "/a" }]);
    expect(out.version).toBe(2);
  });

  it("escapes a path given as an array", () => {
    const svc = opened({ toolState: {} });
    const out = ok(svc.applyOps({ threadId: "t", ops: [{ op: "add", path: ["toolState", "raster-ops/dataset"], value: "era5" }] }));
    expect(out.delta).toEqual([{ op: "add", path: "/toolState/raster-ops~1dataset", value: "era5" }]);
  });

  it("fails an atomic call with PATCH_FAILED and the failing op's index, leaving the mirror and version untouched", () => {
    const svc = opened({ n: 1 });
    const before = ok(svc.getState({ threadId: "t" }));
    const e = fail(svc.applyOps({ threadId: "t", atomic: true, ops: [{ op: "replace", path: "/n", value: 2 }, { op: "remove", path: "/zz" }] }));
    expect(toWireError(e).code).toBe(-32002);
    expect(e.data).toEqual({ code: "PATH_NOT_FOUND", index: 1, message: expect.any(String) });
    expect(ok(svc.getState({ threadId: "t" }))).toEqual(before);
  });

  it("returns an empty delta and no events, at the same version, when every op is skipped", () => {
    const svc = opened({ n: 1 });
    const out = ok(svc.applyOps({ threadId: "t", ops: [{ op: "test", path: "/n", value: 1 }, { op: "remove", path: "/x" }] }));
    expect(out).toMatchObject({ version: 1, delta: [], events: [] });
  });

  it("refuses more ops than maxOps with LIMIT_EXCEEDED before touching the thread", () => {
    const svc = new StateService({ limits: { maxOps: 3 } });
    ok(svc.openRun({ threadId: "t" }));
    const e = fail(svc.applyOps({ threadId: "t", ops: Array.from({ length: 4 }, () => ({ op: "add", path: "/a", value: 1 })) }));
    expect(toWireError(e)).toMatchObject({ code: -32003, data: { code: "LIMIT_EXCEEDED", limit: "maxOps", max: 3, actual: 4 } });
  });
});

describe("normalize", () => {
  it("touches no thread and returns the state after the delta", () => {
    const store = new ThreadStore(10);
    const svc = new StateService({ store });
    const out = ok(svc.normalize({ ops: [{ op: "add", path: "/list/-", value: 1 }], state: { keep: true } }));
    expect(out).toEqual({ delta: [{ op: "add", path: "/list", value: [] }, { op: "add", path: "/list/-", value: 1 }], skipped: [], state: { keep: true, list: [1] } });
    expect(store.size).toBe(0);
  });
});
