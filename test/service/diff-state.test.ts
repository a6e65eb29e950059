import { describe, expect, it } from "vitest";
import { toWireError } from "../../src/rpc/common/wire.js";
import { StateService } from "../../src/service/state-service.js";
import { clientApply } from "../../scripts/harness/agui-client.js";
import { fail, ok } from "../../scripts/harness/outcome.js";

describe("diffState", () => {
  it("gives one op for an unshift into a 10,000-element array, which the client applies", async () => {
    const svc = new StateService();
    const items = Array.from({ length: 10_000 }, (_, i) => ({ id: i, name: `item ${i}` }));
    ok(svc.openRun({ threadId: "t", state: { items } }));
    const out = ok(svc.diffState({ threadId: "t", path: "/items", value: [{ id: -1, name: "new" }, ...items] }));
    expect(out.delta).toEqual([{ op: "add", path: "/items/0", value: { id: -1, name: "new" } }]);
    const client = await clientApply({ items }, out.events);
    expect(client).toEqual(ok(svc.getState({ threadId: "t" })).state);
  });

  it("is silent for an equal value and keeps the version", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { a: { b: [1, 2] } } }));
    expect(ok(svc.diffState({ threadId: "t", value: { a: { b: [1.0, 2] } } }))).toEqual({ version: 1, delta: [], events: [] });
  });

  it("adds a value at a path that does not exist yet when its parent does", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { a: {} } }));
    expect(ok(svc.diffState({ threadId: "t", path: ["a", "x/y"], value: 1 })).delta).toEqual([{ op: "add", path: "/a/x~1y", value: 1 }]);
  });

  it("appends with one add when the path is the index just past the end of an array, and refuses one further", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { todos: ["a"] } }));
    expect(ok(svc.diffState({ threadId: "t", path: "/todos/1", value: "b" })).delta).toEqual([{ op: "add", path: "/todos/1", value: "b" }]);
    expect(fail(svc.diffState({ threadId: "t", path: "/todos/5", value: "c" })).data).toMatchObject({ field: "/path", reason: "INDEX_OUT_OF_BOUNDS" });
  });

  it("refuses a path whose parent does not exist with -32602 and reason PATH_NOT_FOUND", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: {} }));
    const e = fail(svc.diffState({ threadId: "t", path: "/no/such", value: 1 }));
    expect(toWireError(e)).toMatchObject({ code: -32602, data: { code: "INVALID_PARAMS", field: "/path", reason: "PATH_NOT_FOUND" } });
  });

  it("never replaces the root when both old and new roots are objects, so the client's own keys survive", async () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { a: 1 } }));
    const out = ok(svc.diffState({ threadId: "t", value: { b: 2 } }));
    expect(out.delta.map((o) => o.path)).toEqual(["/a", "/b"]);
    expect(await clientApply({ a: 1, clientOnly: true }, out.events)).toEqual({ b: 2, clientOnly: true });
  });
});
