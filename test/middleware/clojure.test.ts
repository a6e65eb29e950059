import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterAll, beforeAll, describe, expect, vi } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { clientApply, runCollecting } from "../../scripts/harness/agui-client.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, SEA, childEnv, run } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { request, runInput } from "../proxy/http-client.js";

/**
 * Issue 24 §4 and §6: agui-state.ring/wrap-agui-state in a real Jetty server
 * (clients/clojure/test/agui_state/ring_agent.clj, one JVM for every case here),
 * in front of an agent that sends `add /todos/-` before /todos exists, an
 * unescaped key, and a STATE_SNAPSHOT after every write. The real HttpAgent
 * runs through it. The witness is `agui-state fix` with the middleware's flags
 * (`--own /toolState --join-keys`, `--state` = the request's RunAgentInput.state)
 * on the bytes the same agent answers without the middleware (/raw), replayed
 * through @ag-ui/client's own defaultApplyEvents. The middleware's sidecar is
 * found as a deployment finds it, from AGUI_STATE_BIN.
 */
const JARS = ["data.json", "ring-core", "ring-jetty-adapter"].map((j) => `/usr/share/java/${j}.jar`);
const { available, test } = toolchain("Clojure + Ring + Jetty (clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", [
  "bash",
  "-c",
  `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`,
]);

const CLIENT_KEYS = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };
const FLAGS = ["--own", "/toolState", "--join-keys"];
/** A hang guard for the JVM's start, never an assertion. */
const START_MS = 110_000;

let server: ChildProcessWithoutNullStreams | undefined;
let url = "";
let stderr = "";
let tmp = "";

beforeAll(async () => {
  // Without the toolchain the tests are skipped (toolchain() said so loudly), or fail under CI.
  if (!available) return;
  tmp = mkdtempSync(path.join(tmpdir(), "agui-ring-"));
  const classpath = [...JARS, "clients/clojure/src", "clients/clojure/test"].join(":");
  const child = spawn("clojure", ["-cp", classpath, "-m", "agui-state.ring-agent"], { cwd: ROOT, env: childEnv({ AGUI_STATE_BIN: BINARY }) });
  server = child;
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  url = await new Promise<string>((resolve, reject) => {
    let out = "";
    const guard = setTimeout(() => reject(new Error(`the Jetty server did not start within ${START_MS} ms; stderr:\n${stderr}`)), START_MS);
    child.on("error", (e) => {
      clearTimeout(guard);
      reject(e);
    });
    child.on("exit", (code) => {
      clearTimeout(guard);
      reject(new Error(`the Jetty server exited (${code}) before listening; stderr:\n${stderr}`));
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      out += d;
      const m = /^listening (http:\/\/127\.0\.0\.1:\d+)\n/.exec(out);
      if (m) {
        clearTimeout(guard);
        resolve(m[1] as string);
      }
    });
  });
}, START_MS + 5_000);

afterAll(() => {
  if (server && server.exitCode === null) server.kill("SIGKILL");
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** The events of an SSE text as `fix` writes it (LF, one data line an event). */
const sseEvents = (text: string): unknown[] =>
  text
    .split("\n\n")
    .filter((b) => b.trim() !== "")
    .map((b) => JSON.parse(b.replace(/^data: /, "")) as unknown);

/** What `agui-state fix FLAGS --state STATE` writes for what the agent answers, unwrapped, to this request. */
async function fixed(state: JsonObject, runId: string): Promise<string> {
  const raw = await request(`${url}/raw`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput(state, runId) });
  expect(raw.status).toBe(200);
  const stateFile = path.join(tmp, `${runId}.json`);
  writeFileSync(stateFile, JSON.stringify(state));
  const r = await run(SEA, ["fix", "--state", stateFile, ...FLAGS], raw.body);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.toString("utf8");
}

const sidecarPid = async (): Promise<number> => Number((await request(`${url}/sidecar-pid`)).body.toString("utf8"));

describe("HttpAgent through wrap-agui-state in Jetty, in front of an agent with three field mistakes", () => {
  test("ends on the state of `fix` on the agent's own bytes, with no warning, the client's keys kept", async () => {
    const agent = new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    for (const runId of ["r1", "r2"]) {
      const before = structuredClone(agent.state) as JsonObject;
      expect(await runCollecting(agent, runId)).toEqual([]);
      const text = await fixed(before, runId);
      expect(agent.state).toEqual(await clientApply(before, sseEvents(text)));
      expect(agent.state).toMatchObject(CLIENT_KEYS);
      // The same request, read as bytes: exactly what `fix` writes (protocol/README.md §14).
      const answer = await request(`${url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput(before, runId) });
      expect(answer.body.toString("utf8")).toBe(text);
      expect(answer.headers["content-type"]).toMatch(/^text\/event-stream/);
    }
    // The unescaped key was read as one key, the snapshots touched /toolState only, /todos was created.
    expect(agent.state).toEqual({ ...CLIENT_KEYS, todos: ["milk", "milk"], toolState: { search: { query: "café ☕", run: "r2" }, "raster-ops/dataset": "era5" } });
  });

  test("the same server without the middleware warns and wipes the client's keys (the negative control)", async () => {
    const agent = new HttpAgent({ url: `${url}/raw`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    const said = await runCollecting(agent, "n1");
    expect(said.length).toBeGreaterThan(0);
    expect(said.join("\n")).toMatch(/todos|raster-ops/);
    expect(agent.state).not.toHaveProperty("selectedLayer");
    expect(agent.state).not.toHaveProperty("ui");
  });

  test("kill -9 of the sidecar mid-stream: the stream completes unrepaired, a warning is logged, the next request is repaired by a new sidecar", async () => {
    const agent = new HttpAgent({ url: `${url}/agent-gated`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    const said: string[] = [];
    const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void said.push(String(a[0])));
    let killed: number;
    try {
      const running = agent.runAgent({ runId: "k1" });
      // The agent stops after its first snapshot, which the middleware has repaired by then (each write is flushed through fixStream).
      const reached = await request(`${url}/gate/reached`);
      expect(reached.status).toBe(200);
      killed = Number(reached.body.toString("utf8"));
      expect(killed).toBeGreaterThan(0);
      process.kill(killed, "SIGKILL");
      expect((await request(`${url}/gate/open`, { method: "POST" })).status).toBe(200);
      await running;
    } finally {
      warn.mockRestore();
    }
    // The run finished; what came after the kill went as the agent wrote it: its unescaped key warned, its snapshot wiped.
    expect(said.join("\n")).toMatch(/raster-ops/);
    expect(agent.state).not.toHaveProperty("selectedLayer");
    expect(stderr).toMatch(/agui-state\.ring: fixStream failed on stream s\d+: agui-state sidecar exited with exit status \d+ .*unrepaired/);

    // The next request: a new sidecar, and the repair as before.
    const next = new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    expect(await runCollecting(next, "k2")).toEqual([]);
    expect(next.state).toEqual(await clientApply(structuredClone(CLIENT_KEYS), sseEvents(await fixed(structuredClone(CLIENT_KEYS), "k2"))));
    expect(next.state).toMatchObject(CLIENT_KEYS);
    const pid = await sidecarPid();
    expect(pid).toBeGreaterThan(0);
    expect(pid).not.toBe(killed);
  });
});
