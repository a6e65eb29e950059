import { expect, it } from "vitest";
import type { Json } from "../../src/core/index.js";
import { clientApply } from "../../scripts/harness/agui-client.js";
import { startPeer, type Peer } from "../../scripts/harness/peer.js";

/**
 * Issue 22 §4 through the real binary: "state that has not moved sends
 * nothing at all" holds for applyOps, normalize and applyActivityOps too
 * (protocol/README.md §5 rule 8, §6).
 */

/** One sidecar per test (the harness kills what a test leaves running), ended cleanly: exit 0. */
async function withPeer(body: (peer: Peer) => Promise<void>): Promise<void> {
  const peer = startPeer();
  await body(peer);
  peer.end();
  expect((await peer.waitForExit()).code).toBe(0);
}

/** The params are written as text, so that `1.0` reaches the sidecar as the client's JSON wrote it. */
async function rawCall(peer: Peer, id: number, method: string, params: string): Promise<Record<string, unknown>> {
  const r = await peer.callRaw(id, `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":${params}}\n`);
  if (!("result" in r)) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
  return r.result as Record<string, unknown>;
}

it("an equal replace, an equal add on a member, a self-move, an equal copy and 1.0 for 1 send nothing and keep the version, lenient or atomic", () =>
  withPeer(async (peer) => {
    const state = {
      n: 1,
      o: { a: [1, { b: 2, c: 3 }] },
      p: { q: [1] },
      r: { q: [1] },
    };
    const opened = await peer.ok("openRun", { threadId: "nm", state });
    expect(opened["version"]).toBe(1);
    const ops = `[{"op":"replace","path":"/n","value":1.0},{"op":"add","path":"/o","value":{"a":[1.0,{"c":3,"b":2}]}},{"op":"move","from":"/o/a","path":"/o/a"},{"op":"copy","from":"/p","path":"/r"},{"op":"replace","path":["o","a",0],"value":1}]`;
    for (const [id, atomic] of [
      [1001, false],
      [1002, true],
    ] as const) {
      const out = await rawCall(peer, id, "applyOps", `{"threadId":"nm","ops":${ops},"atomic":${atomic},"ifVersion":1}`);
      expect(out).toEqual({ version: 1, delta: [], skipped: [], events: [] });
    }
    expect(await peer.ok("getState", { threadId: "nm" })).toEqual({
      version: 1,
      state,
    });
    // normalize answers the same, and returns the state as it was given.
    expect(await rawCall(peer, 1003, "normalize", `{"ops":${ops},"state":${JSON.stringify(state)}}`)).toEqual({ delta: [], skipped: [], state });
  }));

it("among ops that move, only those are sent; the version goes up once, and @ag-ui/client lands on getState", () =>
  withPeer(async (peer) => {
    const state = { list: [5, 5], m: "x" };
    await peer.ok("openRun", { threadId: "nm2", state });
    const out = await peer.ok("applyOps", {
      threadId: "nm2",
      ops: [
        { op: "replace", path: "/m", value: "x" },
        { op: "add", path: "/list/0", value: 5 },
        { op: "copy", from: "/list/0", path: "/list/0" },
        { op: "replace", path: "/m", value: "y" },
        { op: "replace", path: "/m", value: "y" },
      ],
    });
    expect(out["delta"]).toEqual([
      { op: "add", path: "/list/0", value: 5 },
      { op: "copy", from: "/list/0", path: "/list/0" },
      { op: "replace", path: "/m", value: "y" },
    ]);
    expect(out["version"]).toBe(2);
    const now = await peer.ok("getState", { threadId: "nm2" });
    expect(now).toEqual({ version: 2, state: { list: [5, 5, 5, 5], m: "y" } });
    expect(await clientApply(state, out["events"] as unknown[])).toEqual(now["state"] as Json);
  }));

it("in an activity: equal writes send nothing, and a retype with them still counts (§10)", () =>
  withPeer(async (peer) => {
    await peer.ok("openRun", { threadId: "nm3", state: {} });
    const made = await peer.ok("activitySnapshot", {
      threadId: "nm3",
      messageId: "m",
      activityType: "plan",
      content: { steps: ["a", "b"] },
    });
    const v = made["version"] as number;
    const ops = [
      { op: "replace", path: "/steps/1", value: "b" },
      { op: "add", path: "/steps", value: ["a", "b"] },
    ];
    expect(
      await peer.ok("applyActivityOps", {
        threadId: "nm3",
        messageId: "m",
        ops,
        atomic: true,
      }),
    ).toEqual({ version: v, delta: [], skipped: [], events: [] });
    expect(
      await peer.ok("applyActivityOps", {
        threadId: "nm3",
        messageId: "m",
        ops,
        activityType: "plan-2",
      }),
    ).toEqual({
      version: v + 1,
      delta: [],
      skipped: [],
      events: [
        {
          type: "ACTIVITY_DELTA",
          messageId: "m",
          activityType: "plan-2",
          patch: [],
        },
      ],
    });
    expect(await peer.ok("getActivity", { threadId: "nm3", messageId: "m" })).toEqual({
      version: v + 1,
      activityType: "plan-2",
      content: { steps: ["a", "b"] },
    });
  }));
