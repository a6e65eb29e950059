import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { isSea } from "node:sea";
import jsonpatch from "fast-json-patch";
import { applyAtomic, decodeOps, jsonEqual, newDoc, type Json, type JsonObject } from "../core/index.js";
import type { AguiEvent } from "../protocol/types.js";

/** How to start this same program as a sidecar: the binary itself, or node with the bundle. */
function sidecarCommand(): [string, string[]] {
  return isSea() ? [process.execPath, ["serve"]] : [process.execPath, [process.argv[1] as string, "serve"]];
}

/** A minimal JSON-RPC client over the child's stdin/stdout, newline-delimited. */
function connect(): { call: (method: string, params: object) => Promise<Record<string, unknown>>; close: () => Promise<number | null> } {
  const [cmd, args] = sidecarCommand();
  const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, NODE_OPTIONS: "" } });
  const pending = new Map<number, { resolve: (v: Record<string, unknown>) => void; reject: (e: Error) => void }>();
  let next = 1;
  createInterface({ input: child.stdout }).on("line", (line) => {
    const msg = JSON.parse(line) as { id: number; result?: Record<string, unknown>; error?: { message: string } };
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) p?.reject(new Error(msg.error.message));
    else p?.resolve(msg.result ?? {});
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return {
    call: (method, params) =>
      new Promise((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve, reject });
        child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
      }),
    close: () => {
      child.stdin.end();
      return exited;
    },
  };
}

/**
 * The scenario this project comes from, against a real sidecar: a client with
 * keys of its own, two runs, keys with "/" in them, a rewrite that stays
 * silent, a removed key, and a second run that opens with the whole namespace.
 */
export async function runDemo(out: (line: string) => void): Promise<number> {
  const rpc = connect();
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
    const r = await rpc.call(method, { threadId, ...params });
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
  const stored = (await rpc.call("getState", { threadId, path: "/toolState" }))["state"] as JsonObject;
  await step("run 2", "openRun", { runId: "run-2", state: replayWithFastJsonPatch(own, wire), toolState: stored });

  // Both runs' wire, replayed from the client's first state.
  const client = replayWithFastJsonPatch(own, wire);
  const server = (await rpc.call("getState", { threadId }))["state"] as Json;
  const ours = replayWithCore(own, wire);
  const code = await rpc.close();

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
