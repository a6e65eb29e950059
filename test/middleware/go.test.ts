import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterAll, beforeAll, expect } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { clientApply, runCollecting } from "../../scripts/harness/agui-client.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { goBuild } from "../../scripts/harness/go.js";
import { BINARY, childEnv, start, type Sidecar } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";

/**
 * Issue 24 §3 and §6, Go: a real net/http server (clients/go/examples/
 * sloppyagent) whose agent sends unescaped keys, appends to /todos before it
 * exists and sends a STATE_SNAPSHOT on every write, at /agent through
 * aguistate.Middleware (own /toolState, join keys) and at /raw as it is.
 * The real HttpAgent drives it. "The sidecar's view of the stream" is what
 * `agui-state fix` with the same flags and `--state` (the request's
 * RunAgentInput.state) writes for the raw stream, replayed through
 * @ag-ui/client's own apply.
 */
const { test } = toolchain("Go (golang-go)", ["go", "version"]);

const CLIENT = path.join(ROOT, "clients/go");
const CLIENT_KEYS: JsonObject = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };
const FLAGS = ["--own", "/toolState", "--join-keys"];

let tmp = "";
let exe = "";
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "agui-mw-go-"));
  if (spawnSync("go", ["version"], { stdio: "ignore" }).status === 0) exe = goBuild(CLIENT, "./examples/sloppyagent", tmp);
}, 620_000);
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

interface Server {
  child: Sidecar;
  url: string;
}

/** Starts the agent server (the kill registry ends it after the test) and reads its URL. */
async function startServer(): Promise<Server> {
  const child = start({ name: "sloppyagent", file: exe, args: [] }, [], { AGUI_STATE_BIN: BINARY });
  await child.until(() => child.stdout.includes("\n"), "the server's URL");
  return { child, url: child.stdout.toString("utf8").trim() };
}

const input = (runId: string, state: JsonObject): string =>
  JSON.stringify({ threadId: "t1", runId, state, messages: [], tools: [], context: [], forwardedProps: {} });

async function post(url: string, body: string): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  return res.text();
}

/** What `agui-state fix FLAGS --state <state>` writes for `stream`. */
function fixed(state: JsonObject, stream: string): string {
  const file = path.join(tmp, "state.json");
  writeFileSync(file, JSON.stringify(state));
  const r = spawnSync(BINARY, ["fix", ...FLAGS, "--state", file], { input: stream, env: childEnv(), timeout: 30_000 });
  expect([0, 1], r.stderr.toString()).toContain(r.status);
  return r.stdout.toString("utf8");
}

/** The SSE blocks of a stream, each with its blank line. */
const blocks = (stream: string): string[] => stream.split(/(?<=\n\n)/);
const events = (stream: string): unknown[] => blocks(stream).map((b) => JSON.parse(b.replace(/^data: /, "")) as unknown);

/** The state the sidecar's view of one run leaves the client in: fix's output on the raw stream, applied by @ag-ui/client. */
async function sidecarView(server: Server, runId: string, before: JsonObject): Promise<{ text: string; state: unknown }> {
  const text = fixed(before, await post(`${server.url}/raw`, input(runId, before)));
  return { text, state: await clientApply(before, events(text)) };
}

test("HttpAgent through the Go middleware: no warning, the sidecar's view of every run, the client's keys kept", async () => {
  const server = await startServer();
  const agent = new HttpAgent({ url: `${server.url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
  for (const runId of ["r1", "r2"]) {
    const before = structuredClone(agent.state) as JsonObject;
    expect(await runCollecting(agent, runId)).toEqual([]);
    const view = await sidecarView(server, runId, before);
    expect(agent.state).toEqual(view.state);
    expect(agent.state).toMatchObject(CLIENT_KEYS);
    // The bytes too: what the middleware sent is what fix writes.
    expect(await post(`${server.url}/agent`, input(runId, before))).toBe(view.text);
  }
  expect((agent.state as JsonObject)["toolState"]).toEqual({ "raster-ops/dataset": "era5 r2", count: 1 });
  expect((agent.state as JsonObject)["todos"]).toEqual(["milk ☕ r1", "milk ☕ r2"]);
  expect(server.child.stderr).toBe("");
}, 120_000);

test("the same server without the middleware (the negative control): the client warns and its keys are wiped", async () => {
  const server = await startServer();
  const agent = new HttpAgent({ url: `${server.url}/raw`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
  const said = await runCollecting(agent, "r1");
  expect(said.length).toBeGreaterThan(0);
  expect(said.join("\n")).toMatch(/warn/);
  expect(agent.state).not.toHaveProperty("selectedLayer");
  expect(agent.state).not.toHaveProperty("ui");
}, 120_000);

test("kill -9 of the sidecar mid-stream: the stream completes unrepaired from there, with a line in the log, and the next request is repaired", async () => {
  const server = await startServer();
  const pid = Number(await (await fetch(`${server.url}/sidecar`)).text());
  const body = input("k1", CLIENT_KEYS);
  const res = await fetch(`${server.url}/agent?pause=1`, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = res.text();
  expect(await (await fetch(`${server.url}/paused`)).text()).toBe("paused");
  process.kill(pid, "SIGKILL");
  await fetch(`${server.url}/resume`, { method: "POST" });

  // The four events before the kill as fix writes them, the rest as the agent wrote it.
  const raw = blocks(await post(`${server.url}/raw`, body));
  expect(await text).toBe(fixed(CLIENT_KEYS, raw.slice(0, 4).join("")) + raw.slice(4).join(""));
  expect(server.child.stderr).toMatch(/\/agent: the stream repair failed \(agui-state exited: signal: killed\); the rest of this response goes through unrepaired/);

  // The next request: a fresh sidecar, and the run repaired again.
  const agent = new HttpAgent({ url: `${server.url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
  expect(await runCollecting(agent, "k2")).toEqual([]);
  expect(agent.state).toEqual((await sidecarView(server, "k2", CLIENT_KEYS)).state);
  expect(agent.state).toMatchObject(CLIENT_KEYS);
  expect(server.child.stderr).toMatch(/the sidecar had exited .*; restarting it/);
  expect(Number(await (await fetch(`${server.url}/sidecar`)).text())).not.toBe(pid);
  // The server's stdout carried its URL and nothing else.
  expect(server.child.stdout.toString("utf8")).toBe(`${server.url}\n`);
}, 120_000);
