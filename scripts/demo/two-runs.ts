import jsonpatch from "fast-json-patch";
import { JsonDocument, decodeOps, jsonEqual, type Json, type JsonObject } from "../../src/core/index.js";
import type { ActivityEvent, AguiEvent } from "../../src/protocol/types.js";
import { startPeer } from "../harness/peer.js";
import { SEA, type Command } from "../harness/process.js";

/**
 * `npm run demo` (scripts/demo.ts): a client of the real dist/agui-state,
 * talking to it through scripts/harness as an agent server would. The
 * demo is a client, so it is not in the binary: the sidecar ships only what
 * it needs to serve.
 */

/**
 * The scenario this project comes from, against a real sidecar: a client with
 * keys of its own, two runs, keys with "/" in them, a rewrite that stays
 * silent, a removed key, and a second run that opens with the whole namespace.
 * Next to the namespace, an AG-UI activity: a plan whose steps fill in,
 * patched step by step, that outlives the first run.
 */
/** What the demo prints for a call whose `events` is `[]`: the server sends nothing. */
export const NOTHING_MOVED = "(no event: nothing moved)";

export async function runDemo(out: (line: string) => void, command: Command = SEA): Promise<number> {
  const rpc = startPeer({ command });
  const own = { selectedLayer: "era5", ui: { panel: "open" } };
  const threadId = "demo-thread";
  /** Every event the client received, from its first state on. */
  const wire: (AguiEvent | ActivityEvent)[] = [];

  // The wire: each event the agent server forwards, in order, as the compact JSON it sends
  // (an SSE `data:` line), after the run and the call that returned it.
  const show = (run: string, method: string, events: (AguiEvent | ActivityEvent)[]) => {
    const label = `${run}  ${method.padEnd(16)}`;
    if (!events.length) out(`${label} ${NOTHING_MOVED}`);
    for (const e of events) out(`${label} ${JSON.stringify(e)}`);
    wire.push(...events);
  };
  const step = async (run: string, method: string, params: object) => {
    const r = await rpc.ok(method, { threadId, ...params });
    show(run, method, r["events"] as (AguiEvent | ActivityEvent)[]);
    return r;
  };

  out(`client holds ${JSON.stringify(own)}`);
  await step("run 1", "openRun", { runId: "run-1", state: own, toolState: {} });
  await step("run 1", "diffToolState", { set: { "raster-ops/dataset": "era5", "raster-ops/bounds": [0, 0, 10, 10] } });
  await step("run 1", "diffToolState", { set: { "raster-ops/bounds": [0, 0, 10.0, 10] } });
  await step("run 1", "applyOps", { ops: [{ op: "add", path: "/toolState/notes/-", value: "zoomed to bounds" }] });
  await step("run 1", "diffToolState", { remove: ["raster-ops/bounds"] });
  // The plan: created by a diff (the client has no baseline yet, so it goes out as a snapshot),
  // then filled in with model-written ops, one of which names an array that does not exist yet.
  const plan = { threadId, messageId: "plan-1" };
  await step("run 1", "diffActivity", { ...plan, activityType: "plan", content: { title: "map the storm", steps: [] } });
  await step("run 1", "applyActivityOps", { ...plan, ops: [{ op: "add", path: "/steps/-", value: { title: "load era5", done: false } }] });
  await step("run 1", "applyActivityOps", { ...plan, ops: [{ op: "replace", path: "/steps/0/done", value: true }, { op: "add", path: "/log/-", value: "era5 loaded" }] });
  await step("run 1", "diffActivity", { ...plan, content: { title: "map the storm", steps: [{ title: "load era5", done: true }, { title: "draw bounds", done: false }], log: ["era5 loaded"] } });

  // The server keeps the thread's tool state in its own store and hands it back at the next run,
  // with the state the client sends (RunAgentInput.state).
  const stored = (await rpc.ok("getState", { threadId, path: "/toolState" }))["state"] as JsonObject;
  await step("run 2", "openRun", { runId: "run-2", state: replayWithFastJsonPatch(own, wire), toolState: stored });
  await step("run 2", "applyActivityOps", { ...plan, activityType: "plan-done", ops: [{ op: "replace", path: "/steps/1/done", value: true }] });

  // Both runs' wire, replayed from the client's first state.
  const client = replayWithFastJsonPatch(own, wire);
  const server = (await rpc.ok("getState", { threadId }))["state"] as Json;
  const ours = replayWithCore(own, wire);
  const activity = await rpc.ok("getActivity", plan);
  const held = replayActivities(wire).get("plan-1");
  rpc.end();
  const { code } = await rpc.waitForExit();

  const keysKept = (client as JsonObject)["selectedLayer"] === "era5" && jsonEqual((client as JsonObject)["ui"] as Json, own.ui);
  const checks: [string, boolean][] = [
    [`client's own keys after the run: selectedLayer=${JSON.stringify((client as JsonObject)["selectedLayer"])} ui=${JSON.stringify((client as JsonObject)["ui"])}`, keysKept],
    ["applied deltas == getState", ours !== undefined && jsonEqual(ours, server)],
    ["the same through fast-json-patch, as @ag-ui/client applies them", jsonEqual(client, server)],
    [`the client's plan == getActivity (${String(activity["activityType"])}, ${JSON.stringify(activity["content"])})`, held !== undefined && held.type === activity["activityType"] && jsonEqual(held.content, activity["content"] as Json)],
    ["the sidecar exited 0 when its stdin closed", code === 0],
  ];
  out("");
  out(`client holds ${JSON.stringify(client)}`);
  for (const [what, ok] of checks) out(`${what}: ${ok}`);
  return checks.every(([, ok]) => ok) ? 0 : 1;
}

/** What @ag-ui/client does with each state event: applyPatch(state, delta, true, false), or replace on a snapshot. */
function replayWithFastJsonPatch(start: Json, events: (AguiEvent | ActivityEvent)[]): Json {
  let s = structuredClone(start);
  for (const e of events) {
    if (e.type === "STATE_SNAPSHOT") s = e.snapshot;
    else if (e.type === "STATE_DELTA") s = jsonpatch.applyPatch(s, e.delta as jsonpatch.Operation[], true, false).newDocument as Json;
  }
  return s;
}

/**
 * What @ag-ui/client does with each activity event: a snapshot sets the type
 * and content (unless `replace: false` finds one), a delta patches the content
 * with applyPatch(content, patch, true, false) and takes the type from the event.
 */
function replayActivities(events: (AguiEvent | ActivityEvent)[]): Map<string, { type: string; content: Json }> {
  const held = new Map<string, { type: string; content: Json }>();
  for (const e of events) {
    if (e.type === "ACTIVITY_SNAPSHOT" && !(e.replace === false && held.has(e.messageId))) held.set(e.messageId, { type: e.activityType, content: structuredClone(e.content) as Json });
    if (e.type !== "ACTIVITY_DELTA") continue;
    const a = held.get(e.messageId);
    if (a) held.set(e.messageId, { type: e.activityType, content: jsonpatch.applyPatch(a.content, e.patch as jsonpatch.Operation[], true, false).newDocument as Json });
  }
  return held;
}

/** The same replay through agui-state's own strict RFC 6902 engine; undefined if any delta fails. */
function replayWithCore(start: Json, events: (AguiEvent | ActivityEvent)[]): Json | undefined {
  let doc = new JsonDocument(structuredClone(start));
  for (const e of events) {
    if (e.type === "STATE_SNAPSHOT") doc = new JsonDocument(e.snapshot);
    else if (e.type === "STATE_DELTA" && !doc.applyAtomic(decodeOps(e.delta), { normalize: false }).ok) return undefined;
  }
  return doc.root;
}
