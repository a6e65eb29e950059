import { afterEach, describe, expect, it } from "vitest";
import { activityMessage, checkWireEvent, holdsActivity, RealClient } from "../../scripts/harness/agui-activities.js";

/**
 * The checks of scripts/harness/agui-activities.ts bite: a malformed event
 * fails before the client sees it, a patch the client cannot apply fails the
 * feed (the library only warns), and a delta the client silently ignores
 * shows up as a difference. Without these, real-client.test.ts could pass on
 * a sidecar that breaks the promise.
 */

const snapshot = { type: "ACTIVITY_SNAPSHOT", messageId: "m", activityType: "plan", content: { steps: ["a"] } };
const delta = (patch: unknown[], messageId = "m"): Record<string, unknown> => ({ type: "ACTIVITY_DELTA", messageId, activityType: "plan", patch });

describe("checkWireEvent", () => {
  it("accepts the four shapes the sidecar emits", () => {
    for (const e of [
      snapshot,
      { ...snapshot, replace: false },
      delta([{ op: "add", path: "/a", value: 1 }, { op: "remove", path: "/a" }, { op: "move", from: "/b", path: "/c" }, { op: "copy", from: "/c", path: "/d" }, { op: "replace", path: "/d", value: null }]),
      delta([]),
      { type: "STATE_SNAPSHOT", snapshot: { a: 1 } },
      { type: "STATE_DELTA", delta: [{ op: "add", path: "/a~1b/~0/-", value: [] }] },
    ])
      expect(() => checkWireEvent(e), JSON.stringify(e)).not.toThrow();
  });

  it("refuses what EventSchemas refuses, members the wire shape does not have, and ops an event may not carry", () => {
    const bad: [string, unknown][] = [
      ["no messageId", { type: "ACTIVITY_SNAPSHOT", activityType: "plan", content: {} }],
      ["content an array", { ...snapshot, content: [1] }],
      ["an unknown op", delta([{ op: "bogus", path: "/a" }])],
      ["patch not an array", { ...delta([]), patch: {} }],
      ["an extra member", { ...snapshot, threadId: "t" }],
      ["replace: true sent", { ...snapshot, replace: true }],
      ["a delta without its type", { type: "ACTIVITY_DELTA", messageId: "m", patch: [] }],
      ["a test op", delta([{ op: "test", path: "/a", value: 1 }])],
      ["an op on the root", delta([{ op: "add", path: "", value: {} }])],
      ["a copy from the root", delta([{ op: "copy", from: "", path: "/a" }])],
      ["an unescaped ~", delta([{ op: "add", path: "/~2", value: 1 }])],
      ["op members out of RFC 6902's order", delta([{ path: "/a", op: "add", value: 1 }])],
      ["an extra op member", delta([{ op: "remove", path: "/a", value: 1 }])],
      ["a state snapshot that is not an object", { type: "STATE_SNAPSHOT", snapshot: [1] }],
      ["an event type the sidecar never sends", { type: "RUN_STARTED", threadId: "t", runId: "r" }],
    ];
    for (const [what, e] of bad) expect(() => checkWireEvent(e), what).toThrow();
  });
});

describe("RealClient", () => {
  let client: RealClient | undefined;
  afterEach(() => client?.close());

  it("applies snapshots and deltas with @ag-ui/client and keeps the message shape exact", async () => {
    client = new RealClient("t", { a: 1 });
    await client.startRun("r");
    await client.feed([snapshot, delta([{ op: "add", path: "/steps/-", value: "b" }]), { type: "STATE_DELTA", delta: [{ op: "add", path: "/b", value: 2 }] }]);
    expect(client.activity("m")).toEqual(activityMessage("m", "plan", { steps: ["a", "b"] }));
    expect(holdsActivity(client, "m", "plan", { steps: ["a", "b"] })).toBe(true);
    expect(client.state).toEqual({ a: 1, b: 2 });
    await client.finishRun();
    // The next run starts from what the client holds.
    await client.startRun("r2");
    await client.feed([{ ...delta([], "m"), activityType: "plan-2" }]);
    expect(client.activity("m")).toEqual(activityMessage("m", "plan-2", { steps: ["a", "b"] }));
    await client.finishRun();
  });

  it("fails the feed when the library warns about a patch it could not apply", async () => {
    client = new RealClient("t", {});
    await client.startRun("r");
    await client.feed([snapshot]);
    await expect(client.feed([delta([{ op: "replace", path: "/missing", value: 1 }])])).rejects.toThrow(/Failed to apply activity patch/);
  });

  it("fails the feed on a malformed event before the client sees it", async () => {
    client = new RealClient("t", {});
    await client.startRun("r");
    await expect(client.feed([{ ...snapshot, content: "text" }])).rejects.toThrow(/EventSchemas refused/);
    expect(client.activity("m")).toBeUndefined();
  });

  it("shows a delta the client ignores in silence (no activity yet) as a difference, not a pass", async () => {
    client = new RealClient("t", {});
    await client.startRun("r");
    await client.feed([delta([{ op: "add", path: "/a", value: 1 }])]);
    expect(client.complaints).toEqual([]);
    expect(client.activity("m")).toBeUndefined();
    expect(holdsActivity(client, "m", "plan", { a: 1 })).toBe(false);
    await client.finishRun();
  });

  it("with replace: false, keeps an activity the client already holds, whatever the event carries", async () => {
    client = new RealClient("t", {});
    await client.startRun("r");
    await client.feed([snapshot, { ...snapshot, activityType: "other", content: { x: 1 }, replace: false }]);
    expect(client.activity("m")).toEqual(activityMessage("m", "plan", { steps: ["a"] }));
    await client.finishRun();
  });
});
