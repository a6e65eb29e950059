import { describe, expect, it } from "vitest";
import { StateService } from "../../src/service/state-service.js";
import type { AguiEvent } from "../../src/protocol/types.js";
import type { Json, JsonObject } from "../../src/core/index.js";
import { clientApply } from "../../scripts/harness/agui-client.js";
import { ok } from "../../scripts/harness/outcome.js";


describe("the namespace scenario, as the client sees it (@ag-ui/client defaultApplyEvents)", () => {
  it("keeps the client on the mirror's state through two runs, and replaying the wire lands on getState", async () => {
    const svc = new StateService();
    const own = { selectedLayer: "era5", ui: { panel: "open" } };
    let client: Json = structuredClone(own);
    const wire: AguiEvent[] = [];
    // The server's own store of the thread's tool state, as it would persist it.
    let stored: JsonObject = {};

    /** Sends events through the real client and checks it against the mirror after every call. */
    const deliver = async (events: AguiEvent[]) => {
      wire.push(...events);
      client = await clientApply(client, events);
      const mirror = ok(svc.getState({ threadId: "t1", path: "/toolState" })).state;
      expect((client as JsonObject)["toolState"]).toEqual(mirror);
      expect((client as JsonObject)["selectedLayer"]).toBe("era5");
      expect((client as JsonObject)["ui"]).toEqual({ panel: "open" });
    };

    // Run 1: the client sends its state; the server's store is empty.
    const open1 = ok(svc.openRun({ threadId: "t1", runId: "r1", state: structuredClone(client), toolState: stored }));
    expect(open1.delta).toEqual([{ op: "add", path: "/toolState", value: {} }]);
    const startOfRun = structuredClone(client);
    wire.length = 0;
    await deliver(open1.events);
    const replayBase = structuredClone(startOfRun);

    const set1 = ok(svc.diffToolState({ threadId: "t1", set: { "raster-ops/dataset": "era5", "raster-ops/bounds": [0, 0, 10, 10], "weird~key": { a: 1 } } }));
    expect(set1.delta.map((o) => o.path)).toEqual(["/toolState/raster-ops~1bounds", "/toolState/raster-ops~1dataset", "/toolState/weird~0key"]);
    await deliver(set1.events);

    // An equal rewrite is silent: no delta, no events, no new version.
    const same = ok(svc.diffToolState({ threadId: "t1", set: { "raster-ops/bounds": [0, 0, 10.0, 10] } }));
    expect(same).toEqual({ version: set1.version, delta: [], events: [] });

    // The full-map form: one key moves, one vanishes, one is new.
    stored = { "raster-ops/dataset": "gfs", "raster-ops/bounds": [0, 0, 10, 10], "a/b~c": true };
    const full = ok(svc.diffToolState({ threadId: "t1", toolState: stored }));
    expect(full.delta).toEqual([
      { op: "add", path: "/toolState/a~1b~0c", value: true },
      { op: "add", path: "/toolState/raster-ops~1dataset", value: "gfs" },
      { op: "remove", path: "/toolState/weird~0key" },
    ]);
    await deliver(full.events);

    // Removing a key, with the incremental form.
    const rm = ok(svc.diffToolState({ threadId: "t1", remove: ["a/b~c", "not-there"] }));
    expect(rm.delta).toEqual([{ op: "remove", path: "/toolState/a~1b~0c" }]);
    await deliver(rm.events);
    delete stored["a/b~c"];

    // Replaying the whole wire of run 1 from the state at openRun lands on getState.
    const replayed = await clientApply(replayBase, wire);
    expect(replayed).toEqual(ok(svc.getState({ threadId: "t1" })).state);

    // Run 2 writes nothing of its own and opens with the whole namespace.
    const open2 = ok(svc.openRun({ threadId: "t1", runId: "r2", state: structuredClone(client), toolState: stored }));
    expect(open2.delta).toEqual([{ op: "add", path: "/toolState", value: { "raster-ops/dataset": "gfs", "raster-ops/bounds": [0, 0, 10, 10] } }]);
    expect(open2.version).toBe(rm.version);
    await deliver(open2.events);

    // A client that lost track (it holds only its own keys) is resynchronized by the run's first add.
    const fresh = await clientApply(structuredClone(own), open2.events);
    expect(fresh).toEqual({ ...own, toolState: stored });
  });

  it("emits a STATE_SNAPSHOT first when openRun is asked for one", async () => {
    const svc = new StateService();
    const out = ok(svc.openRun({ threadId: "t", state: { mine: 1 }, toolState: { k: "v" }, snapshot: true }));
    expect(out.events).toEqual([
      { type: "STATE_SNAPSHOT", snapshot: { mine: 1, toolState: { k: "v" } } },
      { type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState", value: { k: "v" } }] },
    ]);
    expect(await clientApply({}, out.events)).toEqual({ mine: 1, toolState: { k: "v" } });
  });

  it("keeps the remembered namespace when a later openRun gives only toolState", () => {
    const svc = new StateService();
    ok(svc.openRun({ threadId: "t", state: { x: {} }, namespace: "x" }));
    const again = ok(svc.openRun({ threadId: "t", toolState: { k: 1 } }));
    expect(again.delta).toEqual([{ op: "add", path: "/x", value: { k: 1 } }]);
    expect(ok(svc.getState({ threadId: "t" })).state).toEqual({ x: { k: 1 } });
  });

  it("names the namespace with escaping, and keeps a named namespace across runs", async () => {
    const svc = new StateService();
    const out = ok(svc.openRun({ threadId: "t", namespace: "tools/v1", toolState: { x: 1 } }));
    expect(out.delta).toEqual([{ op: "add", path: "/tools~1v1", value: { x: 1 } }]);
    const d = ok(svc.diffToolState({ threadId: "t", set: { y: 2 } }));
    expect(d.delta).toEqual([{ op: "add", path: "/tools~1v1/y", value: 2 }]);
    expect(await clientApply({ own: true }, [...out.events, ...d.events])).toEqual({ own: true, "tools/v1": { x: 1, y: 2 } });
  });
});

describe("the client harness", () => {
  it("fails when @ag-ui/client drops a delta, so the tests above can fail", async () => {
    await expect(clientApply({}, [{ type: "STATE_DELTA", delta: [{ op: "remove", path: "/missing" }] }])).rejects.toThrow(/dropped a delta/);
  });
});
