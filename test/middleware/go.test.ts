import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from "node:fs";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { expect } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { clientApply, runCollecting } from "../../scripts/harness/agui-client.js";
import { sloppyAgent } from "./go-agent.js";
import { BINARY, childEnv, start, type Sidecar } from "../../scripts/harness/process.js";
import { withoutIds } from "../../scripts/harness/sse-ids.js";
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

const CLIENT_KEYS: JsonObject = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };
const FLAGS = ["--own", "/toolState", "--join-keys"];

const agent = sloppyAgent("agui-mw-go-");

interface Server {
  child: Sidecar;
  url: string;
}

/** Starts the agent server (the kill registry ends it after the test) and reads its URL. */
async function startServer(): Promise<Server> {
  const child = start({ name: "sloppyagent", file: agent.exe(), args: [] }, [], { AGUI_STATE_BIN: BINARY });
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
  const file = path.join(agent.dir(), "state.json");
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
    // (With resume on, as by default, every event has an id, which fix does not write.)
    expect(withoutIds(await post(`${server.url}/agent`, input(runId, before)))).toBe(view.text);
  }
  expect((agent.state as JsonObject)["toolState"]).toEqual({ "raster-ops/dataset": "era5 r2", count: 1 });
  expect((agent.state as JsonObject)["todos"]).toEqual(["milk ☕ r1", "milk ☕ r2"]);
  // Its log: what the middleware changed, by outcome, and nothing else. Whole lines only: the server still
  // runs, and the last response's closing line may still be arriving.
  const log = server.child.stderr.slice(0, server.child.stderr.lastIndexOf("\n") + 1);
  expect(log).toMatch(/^agui-state: \/agent: findings: /);
  expect(log.split("\n").filter((l) => l !== "" && !/^agui-state: \/agent: findings: (\d+ (passed|mended|discarded|kept)(, |$))+/.test(l))).toEqual([]);
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

/** The pids of a process's children, as the kernel lists them (/proc/PID/task/TID/children). */
function childrenOf(pid: number): number[] {
  const tasks = readdirSync(`/proc/${pid}/task`);
  return tasks.flatMap((tid) => readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number));
}

test("issue 31: the sidecar runs before the first request (aguistate.NewMiddleware)", async () => {
  const server = await startServer();
  // The server printed its URL once NewMiddleware returned, and no request has come yet.
  const children = childrenOf(server.child.pid);
  expect(children).toHaveLength(1);
  expect(readlinkSync(`/proc/${children[0] ?? 0}/exe`)).toBe(realpathSync(BINARY));
  expect(Number(await (await fetch(`${server.url}/sidecar`)).text())).toBe(children[0]);
}, 120_000);

/** Waits until the handler of the request paused under `name` has stopped. */
async function paused(server: Server, name: string): Promise<void> {
  expect(await (await fetch(`${server.url}/paused?name=${name}`)).text()).toBe("paused");
}
const resume = (server: Server, name: string) => fetch(`${server.url}/resume?name=${name}`, { method: "POST" });

test("issue 32 case 8: kill -9 of the sidecar in the middle of two runs: both are repaired to their end, the client keeps its keys, and so does the next run", async () => {
  const server = await startServer();
  const pid = Number(await (await fetch(`${server.url}/sidecar`)).text());
  // a: the real HttpAgent; b: a second response open on the same sidecar.
  const agent = new HttpAgent({ url: `${server.url}/agent?pause=a`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
  const run = runCollecting(agent, "k1");
  await paused(server, "a");
  const body = input("k2", CLIENT_KEYS);
  const b = fetch(`${server.url}/agent?pause=b`, { method: "POST", headers: { "content-type": "application/json" }, body }).then((r) => r.text());
  await paused(server, "b");
  process.kill(pid, "SIGKILL");

  await resume(server, "b");
  // The whole response, as fix writes it for the whole stream: as if the sidecar had never died.
  expect(withoutIds(await b)).toBe(fixed(CLIENT_KEYS, await post(`${server.url}/raw`, body)));
  await resume(server, "a");
  expect(await run).toEqual([]);
  expect(agent.state).toEqual((await sidecarView(server, "k1", CLIENT_KEYS)).state);
  expect(agent.state).toMatchObject(CLIENT_KEYS);

  // The next run: the new sidecar, repaired.
  const next = new HttpAgent({ url: `${server.url}/agent`, threadId: "t1", initialState: structuredClone(agent.state) });
  const before = structuredClone(next.state) as JsonObject;
  expect(await runCollecting(next, "k3")).toEqual([]);
  expect(next.state).toEqual((await sidecarView(server, "k3", before)).state);
  expect(next.state).toMatchObject(CLIENT_KEYS);
  expect(Number(await (await fetch(`${server.url}/sidecar`)).text())).not.toBe(pid);

  const log = server.child.stderr;
  expect(log.match(/^agui-state: the sidecar exited \(agui-state exited: signal: killed\); restarted it \(pid \d+\)$/gm)).toHaveLength(1);
  expect(log.match(/^agui-state: \/agent: the stream was opened again on the new sidecar, and the \d+ bytes it had repaired fed to it again: the repair goes on$/gm)).toHaveLength(2);
  expect(log).not.toMatch(/unrepaired/);
  // The server's stdout carried its URL and nothing else.
  expect(server.child.stdout.toString("utf8")).toBe(`${server.url}\n`);
}, 120_000);
