import jsonpatch from "fast-json-patch";
import { applyAtomic, decodeOps, jsonEqual, newDoc, type Json, type JsonObject } from "../../src/core/index.js";
import type { AguiEvent } from "../../src/protocol/types.js";
import { startPeer } from "../harness/peer.js";
import { SEA, type Command } from "../harness/process.js";

/**
 * `npm run demo` (scripts/demo.ts): a client of the real dist/agui-state,
 * talking to it through the test harness as an agent server would. The
 * demo is a client, so it is not in the binary: the sidecar ships only what
 * it needs to serve.
 */

/**
 * The scenario this project comes from, against a real sidecar: a client with
 * keys of its own, two runs, keys with "/" in them, a rewrite that stays
 * silent, a removed key, and a second run that opens with the whole namespace.
 */
export async function runDemo(out: (line: string) => void, command: Command = SEA): Promise<number> {
  const rpc = startPeer({ command });
  const own = { selectedLayer: "era5", ui: { panel: "open" } };
  const threadId = "demo-thread";
  /** Every event the client received, from its first state on. */
  const wire: AguiEvent[] = [];

  const show = (run: string, method: string, events: AguiEvent[]) => {
    const label = `${run}  ${method.padEnd(14)}`;
    if (!events.length) out(`${label} (no event: nothing moved)`);
    for (const e of events) {
      if (e.type === "STATE_SNAPSHOT") out(`${label} STATE_SNAPSHOT`);
      else out(`${label} STATE_DELTA ${String(e.delta.length).padStart(2)} op${e.delta.length === 1 ? " " : "s"}  ${e.delta.map((o) => `${o.op} ${o.path}`).join(", ")}`);
    }
    wire.push(...events);
  };
  const step = async (run: string, method: string, params: object) => {
    const r = await rpc.ok(method, { threadId, ...params });
    show(run, method, r["events"] as AguiEvent[]);
    return r;
  };

  out(`client holds ${JSON.stringify(own)}`);
  await step("run 1", "openRun", { runId: "run-1", state: own, toolState: {} });
  await step("run 1", "diffToolState", { set: { "raster-ops/dataset": "era5", "raster-ops/bounds": [0, 0, 10, 10] } });
  await step("run 1", "diffToolState", { set: { "raster-ops/bounds": [0, 0, 10.0, 10] } });
  await step("run 1", "applyOps", { ops: [{ op: "add", path: "/toolState/notes/-", value: "zoomed to bounds" }] });
  await step("run 1", "diffToolState", { remove: ["raster-ops/bounds"] });

  // The server keeps the thread's tool state in its own store and hands it back at the next run,
  // with the state the client sends (RunAgentInput.state).
  const stored = (await rpc.ok("getState", { threadId, path: "/toolState" }))["state"] as JsonObject;
  await step("run 2", "openRun", { runId: "run-2", state: replayWithFastJsonPatch(own, wire), toolState: stored });

  // Both runs' wire, replayed from the client's first state.
  const client = replayWithFastJsonPatch(own, wire);
  const server = (await rpc.ok("getState", { threadId }))["state"] as Json;
  const ours = replayWithCore(own, wire);
  rpc.end();
  const { code } = await rpc.waitForExit();

  const keysKept = (client as JsonObject)["selectedLayer"] === "era5" && jsonEqual((client as JsonObject)["ui"] as Json, own.ui);
  const checks: [string, boolean][] = [
    [`client's own keys after the run: selectedLayer=${JSON.stringify((client as JsonObject)["selectedLayer"])} ui=${JSON.stringify((client as JsonObject)["ui"])}`, keysKept],
    ["applied deltas == getState", ours !== undefined && jsonEqual(ours, server)],
    ["the same through fast-json-patch, as @ag-ui/client applies them", jsonEqual(client, server)],
    ["the sidecar exited 0 when its stdin closed", code === 0],
  ];
  out("");
  out(`client holds ${JSON.stringify(client)}`);
  for (const [what, ok] of checks) out(`${what}: ${ok}`);
  return checks.every(([, ok]) => ok) ? 0 : 1;
}

/** What @ag-ui/client does with each event: applyPatch(state, delta, true, false), or replace on a snapshot. */
function replayWithFastJsonPatch(start: Json, events: AguiEvent[]): Json {
  let s = structuredClone(start);
  for (const e of events) s = e.type === "STATE_SNAPSHOT" ? e.snapshot : (jsonpatch.applyPatch(s, e.delta as jsonpatch.Operation[], true, false).newDocument as Json);
  return s;
}

/** The same replay through agui-state's own strict RFC 6902 engine; undefined if any delta fails. */
function replayWithCore(start: Json, events: AguiEvent[]): Json | undefined {
  const doc = newDoc(structuredClone(start));
  for (const e of events) {
    if (e.type === "STATE_SNAPSHOT") doc.root = e.snapshot;
    else if (!applyAtomic(doc, decodeOps(e.delta), { normalize: false }).ok) return undefined;
  }
  return doc.root;
}
