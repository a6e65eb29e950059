import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { activityMessage, RealClient } from "../../scripts/harness/agui-activities.js";
import { sameJson } from "../../scripts/harness/json.js";
import type { RpcError } from "../../scripts/harness/jsonrpc.js";
import { startPeer, type Peer } from "../../scripts/harness/peer.js";
import { hostileObject as jsonObject, opsFor } from "../../scripts/witness/differential.js";

/**
 * protocol/README.md §1 and §10 against the real client: the events the real
 * binary returns, fed as one conversation through @ag-ui/client 1.0.0 (its
 * enforceEvents, verifyEvents and defaultApplyEvents, after RUN_STARTED),
 * keep the client's activity messages equal to getActivity and its state
 * equal to getState after every call, with nothing printed by the library.
 * Every event is parsed with @ag-ui/core's EventSchemas and held to the exact
 * wire shapes of §10 before the client sees it (scripts/harness/agui-activities.ts).
 */

type Result = Record<string, unknown>;

/** A sidecar and a client that receives every event the sidecar returns for one thread. */
class Conversation {
  /** Activities the client must hold exactly as the sidecar does. */
  readonly activities = new Set<string>();
  /** Activities the client holds that the sidecar lost: checked by the test itself. */
  readonly lost = new Set<string>();
  checks = 0;

  constructor(
    public peer: Peer,
    readonly client: RealClient,
  ) {}

  get threadId(): string {
    return this.client.threadId;
  }

  /** A call whose events go to the client; then the client must match the sidecar. */
  async call(method: string, params: Result): Promise<Result> {
    return this.deliver(method, params, await this.peer.ok(method, { threadId: this.threadId, ...params }));
  }

  /** Checks a call's events against its result, feeds them to the client, and compares. */
  async deliver(method: string, params: Result, r: Result): Promise<Result> {
    expect(Array.isArray(r["events"]), `${method} returned events`).toBe(true);
    const events = r["events"] as Result[];
    for (const e of events) {
      // A delta event carries exactly the result's delta (§6, §10), for the activity the call named.
      if (e["type"] === "STATE_DELTA") expect(e["delta"], `${method}: STATE_DELTA.delta is the result's delta`).toEqual(r["delta"]);
      if (e["type"] === "ACTIVITY_DELTA") expect(e["patch"], `${method}: ACTIVITY_DELTA.patch is the result's delta`).toEqual(r["delta"]);
      if (e["type"] === "ACTIVITY_SNAPSHOT" || e["type"] === "ACTIVITY_DELTA") {
        expect(e["messageId"], `${method}: the event's messageId`).toBe(params["messageId"]);
        this.activities.add(e["messageId"] as string);
        this.lost.delete(e["messageId"] as string);
      }
    }
    await this.client.feed(events);
    await this.expectInSync(r["version"] as number);
    return r;
  }

  /** A call that must fail; the client gets nothing and must still match. */
  async fails(method: string, params: Result): Promise<RpcError> {
    const e = await this.peer.fails(method, { threadId: this.threadId, ...params });
    await this.expectInSync();
    return e;
  }

  /** The client's state is getState's, and each activity message is getActivity's, at the version the call reported. */
  async expectInSync(version?: number): Promise<void> {
    this.checks++;
    const st = await this.peer.ok("getState", { threadId: this.threadId });
    if (version !== undefined) expect(st["version"], "the call's version is the thread's").toBe(version);
    expect(sameJson(this.client.state, st["state"]), `client state ${JSON.stringify(this.client.state)} vs getState ${JSON.stringify(st["state"])}`).toBe(true);
    for (const id of this.activities) {
      if (this.lost.has(id)) continue;
      const a = await this.peer.ok("getActivity", { threadId: this.threadId, messageId: id });
      expect(a["version"], "getActivity's version is the thread's").toBe(st["version"]);
      const want = activityMessage(id, a["activityType"] as string, a["content"] as JsonObject);
      const got = this.client.activity(id);
      expect(sameJson(got, want), `client holds ${JSON.stringify(got)}, getActivity says ${JSON.stringify(want)}`).toBe(true);
    }
    // The client holds no activity the test does not know of.
    const held = this.client.messages.filter((m) => m.role === "activity").map((m) => m.id);
    expect(held.sort()).toEqual([...this.activities].sort());
    expect(this.client.complaints).toEqual([]);
  }
}

const conversations: Conversation[] = [];
afterEach(async () => {
  for (const c of conversations.splice(0)) {
    c.client.close();
    c.peer.end();
    await c.peer.waitForExit();
  }
});

async function converse(threadId: string, state: JsonObject, args: string[] = []): Promise<Conversation> {
  const c = new Conversation(startPeer({ args }), new RealClient(threadId, state));
  conversations.push(c);
  await c.client.startRun("run-1");
  // The client sends its state; the sidecar snapshots it back.
  const open = await c.call("openRun", { runId: "run-1", state: structuredClone(state), snapshot: true });
  expect((open["events"] as Result[]).map((e) => e["type"])).toEqual(["STATE_SNAPSHOT"]);
  return c;
}

const eventTypes = (r: Result): unknown[] => (r["events"] as Result[]).map((e) => e["type"]);

describe("@ag-ui/client 1.0.0 replays the sidecar's activity and state events onto getActivity and getState", () => {
  it("keeps three activities and the state in step through a run that mixes every kind of event", async () => {
    const c = await converse("mixed", { plan: "p", ui: { panel: "open" } });

    expect(eventTypes(await c.call("diffActivity", { messageId: "plan-1", activityType: "plan", content: { steps: [{ title: "search", done: false }] } }))).toEqual(["ACTIVITY_SNAPSHOT"]);
    expect(eventTypes(await c.call("activitySnapshot", { messageId: "search-1", activityType: "search", content: { query: "raster ops", results: [] } }))).toEqual(["ACTIVITY_SNAPSHOT"]);
    expect(eventTypes(await c.call("applyOps", { ops: [{ op: "add", path: "/progress", value: 0 }, { op: "replace", path: "/ui/panel", value: "closed" }] }))).toEqual(["STATE_DELTA"]);

    const steps = await c.call("applyActivityOps", { messageId: "plan-1", ops: [{ op: "add", path: "/steps/-", value: { title: "rank", done: false } }, { op: "replace", path: "/steps/0/done", value: true }] });
    expect(steps["events"]).toEqual([{ type: "ACTIVITY_DELTA", messageId: "plan-1", activityType: "plan", patch: steps["delta"] }]);

    await c.call("diffState", { path: "/progress", value: 0.5 });
    const found = await c.call("diffActivity", { messageId: "search-1", content: { query: "raster ops", results: [{ id: 1, title: "era5" }] } });
    expect(eventTypes(found)).toEqual(["ACTIVITY_DELTA"]);

    await c.call("activitySnapshot", { messageId: "log-1", activityType: "log", content: { lines: [] } });
    for (const line of ["a", "b", "c"]) await c.call("applyActivityOps", { messageId: "log-1", ops: [{ op: "add", path: "/lines/-", value: line }] });
    // A STATE_SNAPSHOT mid-run (openRun with snapshot) must not touch the activities.
    expect(eventTypes(await c.call("openRun", { runId: "run-1", snapshot: true }))).toEqual(["STATE_SNAPSHOT"]);
    await c.call("diffState", { value: { plan: "p2", ui: { panel: "closed" }, progress: 1 } });
    // A test that holds is checked and dropped; the remove goes out.
    const tested = await c.call("applyActivityOps", { messageId: "log-1", ops: [{ op: "test", path: "/lines/0", value: "a" }, { op: "remove", path: "/lines/0" }] });
    expect(tested["delta"]).toEqual([{ op: "remove", path: "/lines/0" }]);
    // The same snapshot again: the event is still sent, nothing moves.
    const again = await c.call("activitySnapshot", { messageId: "log-1", activityType: "log", content: { lines: ["b", "c"] } });
    expect(again["version"]).toBe(tested["version"]);

    await c.client.finishRun();
    expect(c.activities).toEqual(new Set(["plan-1", "search-1", "log-1"]));
    expect(c.client.fed).toBeGreaterThanOrEqual(15);
  });

  it("carries a retype to the client, by applyActivityOps and by diffActivity, with and without content changes", async () => {
    const c = await converse("retype", { s: 1 });
    const created = await c.call("diffActivity", { messageId: "m", activityType: "plan", content: { steps: ["a"] } });

    // applyActivityOps: a retype alone is an ACTIVITY_DELTA with an empty patch.
    const typeOnly = await c.call("applyActivityOps", { messageId: "m", ops: [], activityType: "plan-running" });
    expect(typeOnly).toEqual({ version: (created["version"] as number) + 1, delta: [], skipped: [], events: [{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan-running", patch: [] }] });
    // ...with ops: the delta carries the new type.
    const withOps = await c.call("applyActivityOps", { messageId: "m", activityType: "plan-review", ops: [{ op: "add", path: "/steps/-", value: "b" }] });
    expect(withOps["events"]).toEqual([{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan-review", patch: [{ op: "add", path: "/steps/-", value: "b" }] }]);
    // ...when every op is skipped, the retype still goes out.
    const skipped = await c.call("applyActivityOps", { messageId: "m", activityType: "plan-stuck", ops: [{ op: "remove", path: "/nope" }] });
    expect(skipped["events"]).toEqual([{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan-stuck", patch: [] }]);
    // The current type given again is no retype: nothing moves.
    const same = await c.call("applyActivityOps", { messageId: "m", activityType: "plan-stuck", ops: [{ op: "remove", path: "/nope" }] });
    expect(same["events"]).toEqual([]);
    expect(same["version"]).toBe(skipped["version"]);

    // diffActivity: equal content, new type.
    const diffType = await c.call("diffActivity", { messageId: "m", activityType: "plan-done", content: { steps: ["a", "b"] } });
    expect(diffType["events"]).toEqual([{ type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan-done", patch: [] }]);
    // ...new content and new type at once.
    const diffBoth = await c.call("diffActivity", { messageId: "m", activityType: "summary", content: { text: "done" } });
    expect((diffBoth["events"] as Result[])[0]).toMatchObject({ type: "ACTIVITY_DELTA", activityType: "summary" });
    // ...content only: the delta carries the type the activity has.
    const diffContent = await c.call("diffActivity", { messageId: "m", content: { text: "done!" } });
    expect((diffContent["events"] as Result[])[0]).toMatchObject({ type: "ACTIVITY_DELTA", activityType: "summary" });
    // A snapshot retypes too.
    await c.call("activitySnapshot", { messageId: "m", activityType: "plan", content: { steps: [] } });
    await c.client.finishRun();
  });

  it("replace: false leaves an existing activity as it is on the sidecar and on the client, and creates a new one", async () => {
    const c = await converse("keep", {});
    const made = await c.call("diffActivity", { messageId: "m", activityType: "plan", content: { steps: [{ title: "search", done: false }] } });
    const kept = await c.call("activitySnapshot", { messageId: "m", activityType: "other", content: { overwritten: true }, replace: false });
    expect(kept).toEqual({ version: made["version"], events: [{ type: "ACTIVITY_SNAPSHOT", messageId: "m", activityType: "plan", content: { steps: [{ title: "search", done: false }] }, replace: false }] });
    expect(c.client.activity("m")).toMatchObject({ activityType: "plan", content: { steps: [{ title: "search", done: false }] } });

    const fresh = await c.call("activitySnapshot", { messageId: "n", activityType: "note", content: { text: "hi" }, replace: false });
    expect(fresh["version"]).toBe((made["version"] as number) + 1);
    // Created here, it goes out without replace: it must replace any older copy a client kept (§10).
    expect(fresh["events"]).toEqual([{ type: "ACTIVITY_SNAPSHOT", messageId: "n", activityType: "note", content: { text: "hi" } }]);
    // Deltas on both go on applying.
    await c.call("applyActivityOps", { messageId: "m", ops: [{ op: "replace", path: "/steps/0/done", value: true }] });
    await c.call("applyActivityOps", { messageId: "n", ops: [{ op: "replace", path: "/text", value: "hello" }] });
    // replace: true (the default) replaces both type and content.
    await c.call("activitySnapshot", { messageId: "m", activityType: "other", content: { overwritten: true } });
    await c.client.finishRun();
  });

  it("normalizes model-written ops that do not fit, skips the ones that cannot, and the client lands on getActivity", async () => {
    const c = await converse("model", { plan: "p" });
    await c.call("diffActivity", { messageId: "plan-1", activityType: "plan", content: { steps: [{ title: "search", done: false }], meta: { n: 1 } } });

    const r = await c.call("applyActivityOps", {
      messageId: "plan-1",
      ops: [
        { op: "replace", path: "/status", value: "running" }, // a replace of a missing member sets it
        { op: "add", path: "/notes/-", value: "started" }, // an append to a missing array creates it
        { op: "replace", path: "", value: [1, 2] }, // the content stays an object
        { op: "add", path: "/x/y/-", value: 1 }, // nothing is invented two levels down
        { op: "remove", path: "" },
        { op: "replace", path: "/steps/-", value: {} }, // "-" names no element to replace
        { op: "add", path: "/steps/7", value: {} },
        { op: "add", path: "/steps/01", value: {} },
        { op: "add", path: ["meta", "__proto__", "polluted"], value: true },
        { op: "move", from: "/meta", path: "/meta/n" },
        { op: "test", path: "/meta/n", value: 2 },
        { op: "copy", from: "", path: "/backup" }, // a copy of the root goes out as an add
        { op: "add", path: ["a/b", "~"], value: 1 }, // the parent is missing
        { op: "add", path: ["a/b"], value: { "~": 0 } },
        { op: "replace", path: ["a/b", "~"], value: 2 },
        { op: "bogus", path: "/x" },
        "not an op",
      ],
    });
    expect((r["skipped"] as Result[]).map((s) => [s["index"], s["code"]])).toEqual([
      [2, "ROOT_NOT_OBJECT"],
      [3, "PATH_NOT_FOUND"],
      [4, "ROOT_NOT_OBJECT"],
      [5, "INVALID_INDEX"],
      [6, "INDEX_OUT_OF_BOUNDS"],
      [7, "INVALID_INDEX"],
      [8, "FORBIDDEN_KEY"],
      [9, "MOVE_INTO_ITSELF"],
      [10, "TEST_FAILED"],
      [12, "PATH_NOT_FOUND"],
      [15, "INVALID_OP"],
      [16, "INVALID_OP"],
    ]);
    expect((r["delta"] as Result[]).slice(0, 3)).toEqual([
      { op: "add", path: "/status", value: "running" },
      { op: "add", path: "/notes", value: [] },
      { op: "add", path: "/notes/-", value: "started" },
    ]);
    expect((r["delta"] as Result[]).map((o) => o["path"])).toEqual(["/status", "/notes", "/notes/-", "/backup", "/a~1b", "/a~1b/~0"]);

    // A root replace with an object is sent as member ops, never as an op on "".
    const root = await c.call("applyActivityOps", { messageId: "plan-1", ops: [{ op: "replace", path: "", value: { steps: [], status: "reset" } }] });
    expect((root["delta"] as Result[]).every((o) => o["path"] !== "")).toBe(true);
    // A move within an array, and one whose target runs through a later element of the array it leaves.
    await c.call("applyActivityOps", { messageId: "plan-1", ops: [{ op: "add", path: "/steps", value: [{ k: [] }, "b", { k: [] }] }] });
    await c.call("applyActivityOps", { messageId: "plan-1", ops: [{ op: "move", from: "/steps/1", path: "/steps/1/k/0" }, { op: "move", from: "/steps/0", path: "/steps/-" }] });

    // Atomic mode: the first skip fails the call, and the client is sent nothing.
    const before = await c.peer.ok("getActivity", { threadId: "model", messageId: "plan-1" });
    const e = await c.fails("applyActivityOps", { messageId: "plan-1", atomic: true, activityType: "never", ops: [{ op: "add", path: "/ok", value: 1 }, { op: "replace", path: "", value: "scalar" }] });
    expect(e.code).toBe(-32002);
    expect(e.data).toMatchObject({ code: "ROOT_NOT_OBJECT", index: 1 });
    expect(await c.peer.ok("getActivity", { threadId: "model", messageId: "plan-1" })).toEqual(before);
    await c.client.finishRun();
  });

  it("keeps hostile member names exact on the client: escapes, '-', '', and prototype names as plain data", async () => {
    const c = await converse("hostile", { "a/b": 1 });
    await c.call("activitySnapshot", { messageId: "h", activityType: "t", content: { "a/b": { "~": 1 }, "": [], "-": 0, nested: { ["__proto__"]: { x: 1 }, constructor: { prototype: 1 } } } });
    await c.call("applyActivityOps", {
      messageId: "h",
      ops: [
        { op: "replace", path: ["a/b", "~"], value: 2 },
        { op: "add", path: ["", "-"], value: "x" },
        { op: "replace", path: "/-", value: 1 }, // a member named "-": sent as an add
        { op: "add", path: ["m~n"], value: { "0": "zero", "01": "one" } },
        { op: "add", path: ["nested", "constructor", "prototype"], value: 2 }, // refused: FORBIDDEN_KEY
      ],
    });
    // Changing a __proto__ member below the root: its object goes whole, the key as plain data.
    const nested = await c.call("diffActivity", { messageId: "h", content: { "a/b": { "~": 2 }, "": ["x"], "-": 1, "m~n": { "0": "zero", "01": "one" }, nested: { ["__proto__"]: { x: 2 }, constructor: { prototype: 1 } } } });
    expect((nested["delta"] as Result[]).map((o) => o["path"])).toEqual(["/nested"]);
    // At the root no op can name it: refused, and nothing moves.
    const e = await c.fails("diffActivity", { messageId: "h", content: { ["__proto__"]: { polluted: true } } });
    expect(e.data).toMatchObject({ code: "INVALID_PARAMS", field: "/content", reason: "FORBIDDEN_KEY" });
    // A snapshot carries it as data.
    await c.call("activitySnapshot", { messageId: "h", activityType: "t", content: { ["__proto__"]: { polluted: true }, k: 1 } });
    await c.call("applyActivityOps", { messageId: "h", ops: [{ op: "add", path: "/k", value: 2 }] });
    const held = c.client.activity("h") as unknown as { content: Record<string, unknown> };
    expect(Object.keys(held.content)).toEqual(["__proto__", "k"]);
    expect(Object.getPrototypeOf(held.content)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
    await c.client.finishRun();
  });

  it("an activity the sidecar lost: applyActivityOps fails with -32005, diffActivity resynchronizes the client with an ACTIVITY_SNAPSHOT", async () => {
    const c = await converse("lost", { plan: "p" });
    await c.call("diffActivity", { messageId: "plan-1", activityType: "plan", content: { steps: [{ title: "search", done: false }] } });
    await c.call("activitySnapshot", { messageId: "search-1", activityType: "search", content: { query: "q", results: [1] } });
    await c.call("activitySnapshot", { messageId: "log-1", activityType: "log", content: { lines: ["a"] } });
    await c.call("applyActivityOps", { messageId: "plan-1", ops: [{ op: "replace", path: "/steps/0/done", value: true }] });
    await c.call("applyOps", { ops: [{ op: "add", path: "/progress", value: 0.5 }] });
    await c.client.finishRun();

    // The sidecar dies; the agent server starts a fresh one, and the next run opens the thread again.
    c.peer.kill();
    await c.peer.waitForExit();
    c.peer = startPeer();
    for (const id of c.activities) c.lost.add(id);
    await c.client.startRun("run-2");
    const open = await c.call("openRun", { runId: "run-2", state: structuredClone(c.client.state) as JsonObject });
    expect(open).toMatchObject({ version: 1, events: [] });

    // Both activities are gone from the sidecar, not from the client.
    const gone = await c.fails("applyActivityOps", { messageId: "plan-1", ops: [{ op: "add", path: "/steps/-", value: { title: "rank", done: false } }] });
    expect(gone).toMatchObject({ code: -32005, data: { code: "UNKNOWN_ACTIVITY", threadId: "lost", messageId: "plan-1" } });
    expect(await c.peer.fails("getActivity", { threadId: "lost", messageId: "search-1" })).toMatchObject({ code: -32005, data: { code: "UNKNOWN_ACTIVITY", threadId: "lost", messageId: "search-1" } });
    // Recreating one needs its type.
    expect(await c.fails("diffActivity", { messageId: "plan-1", content: {} })).toMatchObject({ code: -32602, data: { field: "/activityType", reason: "MISSING" } });
    expect(c.client.activity("plan-1")).toMatchObject({ content: { steps: [{ title: "search", done: true }] } });

    // diffActivity with the server's own record snapshots it: the client is overwritten with it.
    const resync = await c.call("diffActivity", { messageId: "plan-1", activityType: "plan", content: { steps: [{ title: "search", done: true }, { title: "rank", done: false }] } });
    expect(resync).toEqual({ version: 2, delta: [], events: [{ type: "ACTIVITY_SNAPSHOT", messageId: "plan-1", activityType: "plan", content: { steps: [{ title: "search", done: true }, { title: "rank", done: false }] } }] });
    // ...even when the record has a different type and content from what the client held.
    await c.call("diffActivity", { messageId: "search-1", activityType: "search-v2", content: { query: "q2" } });
    // activitySnapshot (replace defaults to true) resynchronizes as well.
    const snap = await c.call("activitySnapshot", { messageId: "log-1", activityType: "log", content: { lines: [] } });
    expect(snap["events"]).toEqual([{ type: "ACTIVITY_SNAPSHOT", messageId: "log-1", activityType: "log", content: { lines: [] } }]);
    expect(c.lost.size).toBe(0);
    // From here on, deltas apply again.
    await c.call("applyActivityOps", { messageId: "plan-1", ops: [{ op: "replace", path: "/steps/1/done", value: true }] });
    await c.call("diffActivity", { messageId: "search-1", content: { query: "q2", results: [] } });
    await c.call("applyActivityOps", { messageId: "log-1", ops: [{ op: "add", path: "/lines/-", value: "b" }] });
    await c.client.finishRun();
  });
});

describe("a seeded random conversation through @ag-ui/client", () => {
  const SEED = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : 20261202;
  const STEPS = 400;
  const pick = <T>(arb: fc.Arbitrary<T>, step: number): T => fc.sample(arb, { seed: SEED * 1000 + step, numRuns: 1 })[0] as T;

  it(`keeps the client on getState and getActivity through ${STEPS} random calls with partly broken ops and hostile keys (seed ${SEED})`, async () => {
    const c = await converse("random", { a: 1 });
    const ids = ["m-1", "m/2", "m~3"];
    const types = fc.constantFrom("plan", "search", "log");
    const outcomes: Record<string, number> = {};
    const count = (k: string): void => void (outcomes[k] = (outcomes[k] ?? 0) + 1);
    for (let step = 0; step < STEPS; step++) {
      const [kind, id, type, atomic, retype] = pick(fc.tuple(fc.integer({ min: 0, max: 9 }), fc.constantFrom(...ids), types, fc.boolean(), fc.boolean()), step);
      const exists = c.activities.has(id);
      const content = exists ? ((await c.peer.ok("getActivity", { threadId: "random", messageId: id }))["content"] as JsonObject) : {};
      let method: string;
      let params: Result;
      if (kind <= 3) {
        method = "applyActivityOps";
        params = { messageId: id, ops: pick(opsFor(content), step), atomic: atomic && kind === 0, ...(retype ? { activityType: type } : {}) };
      } else if (kind <= 5) {
        // A target near the current content (random ops through normalize), or a new one.
        const target = kind === 4 ? ((await c.peer.ok("normalize", { state: content, ops: pick(opsFor(content), step) }))["state"] as JsonObject) : pick(jsonObject, step);
        method = "diffActivity";
        params = { messageId: id, content: target, ...(retype || !exists ? { activityType: type } : {}) };
      } else if (kind === 6) {
        method = "activitySnapshot";
        params = { messageId: id, activityType: type, content: pick(jsonObject, step), ...(atomic ? { replace: false } : {}) };
      } else if (kind === 7) {
        method = "applyOps";
        params = { ops: pick(opsFor(c.client.state), step) };
      } else if (kind === 8) {
        method = "diffState";
        params = { value: pick(jsonObject, step) };
      } else {
        method = "openRun";
        params = { runId: "run-1", snapshot: true };
      }
      const r = await c.peer.call(method, { threadId: "random", ...params });
      if ("result" in r) {
        count(`${method} ok`);
        await c.deliver(method, params, r.result as Result);
      } else {
        // The only refusals these calls may meet, each for its documented reason.
        const data = r.error.data as Result;
        const allowed =
          (r.error.code === -32005 && method === "applyActivityOps" && !exists) ||
          (r.error.code === -32002 && method === "applyActivityOps" && atomic) ||
          (r.error.code === -32602 && method === "diffActivity" && data["reason"] === "FORBIDDEN_KEY") ||
          (r.error.code === -32602 && method === "diffState" && data["reason"] === "FORBIDDEN_KEY");
        expect(allowed, `${method} ${JSON.stringify(params)} failed with ${JSON.stringify(r.error)}`).toBe(true);
        count(`${method} ${r.error.code}`);
        await c.expectInSync();
      }
    }
    await c.client.finishRun();
    process.stderr.write(`[activities] seed ${SEED}: ${JSON.stringify(outcomes)}; ${c.client.fed} events fed, ${c.checks} comparisons\n`);
    // The walk reached every method, and deltas on existing activities.
    for (const m of ["applyActivityOps ok", "diffActivity ok", "activitySnapshot ok", "applyOps ok", "diffState ok"]) expect(outcomes[m] ?? 0, m).toBeGreaterThan(5);
    expect(c.activities.size).toBe(ids.length);
  }, 120_000);
});
