import { readdirSync, readFileSync, readlinkSync, realpathSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { expect, vi } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, SEA, WAIT_MS, run, start, type Sidecar } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { withoutIds } from "../../scripts/harness/sse-ids.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { replayState } from "./replay-state.js";

/**
 * Issue 24 §2 and §6, Python: a real uvicorn serving FastAPI with
 * `app.add_middleware(AguiStateMiddleware, own=["/toolState"], join_keys=True, paths=["/agent"])`
 * (clients/python/examples/middleware_server.py), in front of an agent that
 * sends unescaped keys, `add /todos/-` before /todos exists and a snapshot on
 * every write, driven by the real HttpAgent. The same agent at /raw, outside
 * `paths`, is the negative control and gives the stream as the agent sent it,
 * which `agui-state fix` with the same flags (and `--state` the run's
 * RunAgentInput.state) turns into the sidecar's view: the middleware must
 * forward exactly that. The ASGI details (body replay, characters cut between
 * chunks, disconnects) are clients/python/tests/test_asgi.py's.
 */

const PYTHON = "/usr/bin/python3";
const stack = toolchain("Python middleware (Debian python3-fastapi, python3-starlette, python3-uvicorn)", [PYTHON, "-c", "import fastapi, starlette, uvicorn"]);
const SERVER = path.join(ROOT, "clients/python/examples/middleware_server.py");
const FLAGS = ["--own", "/toolState", "--join-keys"];
const CLIENT_KEYS: JsonObject = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };

interface Server {
  url: string;
  port: string;
  child: Sidecar;
}

async function startServer(lifespan: "on" | "off" | "auto" = "on", ...flags: string[]): Promise<Server> {
  const child = start({ name: "uvicorn (middleware_server.py)", file: PYTHON, args: [SERVER, "--lifespan", lifespan, ...flags] }, [], { AGUI_STATE_BIN: BINARY, PYTHONDONTWRITEBYTECODE: "1" });
  await child.until(() => /listening on \d+\n/.test(child.stdout.toString("utf8")), "the server to listen", 30_000);
  const port = /listening on (\d+)/.exec(child.stdout.toString("utf8"))?.[1] ?? "";
  return { url: `http://127.0.0.1:${port}`, port, child };
}

const runInput = (state: JsonObject, runId: string, forwardedProps: JsonObject = {}): string =>
  JSON.stringify({ threadId: "t1", runId, state, messages: [], tools: [], context: [], forwardedProps });

/** A POST read as it streams: `text` so far, `until` a condition on it holds, `done` at its end. */
function post(url: string, body: string): { text: () => string; until: (test: (t: string) => boolean, what: string) => Promise<void>; done: Promise<string> } {
  let text = "";
  const waiters = new Set<() => void>();
  const done = new Promise<string>((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, agent: false }, (res) => {
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        text += d;
        for (const w of [...waiters]) w();
      });
      res.on("end", () => resolve(text));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
  const until = (test: (t: string) => boolean, what: string): Promise<void> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}; got so far:\n${text}`)), WAIT_MS);
      const check = () => {
        if (!test(text)) return;
        clearTimeout(timer);
        waiters.delete(check);
        resolve();
      };
      waiters.add(check);
      check();
    });
  return { text: () => text, until, done };
}

/** `agui-state fix` with the middleware's flags over a stream as the agent sent it: the sidecar's view. */
async function fix(stream: string, state: JsonObject): Promise<string> {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-mw-"));
  try {
    writeFileSync(path.join(dir, "state.json"), JSON.stringify(state));
    const r = await run(SEA, ["fix", "--state", path.join(dir, "state.json"), ...FLAGS], stream);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.toString("utf8");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The live sidecars the server process started (its children running dist/agui-state), from /proc. */
function sidecarsOf(ppid: number): number[] {
  const binary = realpathSync(BINARY);
  const found: number[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === ppid && readlinkSync(`/proc/${pid}/exe`) === binary) found.push(Number(pid));
    } catch {
      // gone meanwhile (a zombie has no exe either)
    }
  }
  return found;
}

/** Two runs of the real HttpAgent through the middleware: no warning, the client's keys kept, on fix's state. */
async function repairedRuns(url: string, runIds: string[]): Promise<HttpAgent> {
  const agent = new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
  for (const runId of runIds) {
    const before = structuredClone(agent.state) as JsonObject;
    expect(await runCollecting(agent, runId), runId).toEqual([]);
    const sent = await post(`${url}/raw`, runInput(before, runId)).done;
    expect(agent.state, runId).toEqual(replayState(before, await fix(sent, before)));
    expect(agent.state, runId).toMatchObject(CLIENT_KEYS);
  }
  return agent;
}

stack.test("HttpAgent through AguiStateMiddleware under uvicorn ends on the sidecar's view, warns of nothing and keeps the client's keys", async () => {
  const { url, child } = await startServer();
  const agent = await repairedRuns(url, ["r1", "r2"]);
  const state = agent.state as JsonObject;
  expect(state["toolState"]).toEqual({ "raster-ops/zoom": 3, "raster-ops/dataset": "era5", run: "r2" });
  expect(state["todos"]).toEqual(["check r1", "check r2"]);
  // Byte for byte: what the middleware forwards is what fix writes for what the agent sent, each event with
  // an id before it (resume is on by default, protocol/README.md §16).
  const through = await post(`${url}/agent`, runInput(CLIENT_KEYS, "r3")).done;
  expect(withoutIds(through)).toBe(await fix(await post(`${url}/raw`, runInput(CLIENT_KEYS, "r3")).done, CLIENT_KEYS));
  expect(through).toContain("été … 🌍 r3");
  expect(child.stderr, "no warning in the server's log").toBe("");
});

stack.test("the same server without the middleware (the negative control): HttpAgent warns and the client's keys are wiped", async () => {
  const { url } = await startServer();
  const agent = new HttpAgent({ url: `${url}/raw`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
  const said = await runCollecting(agent, "r1");
  expect(said.length, "the unescaped key and the append to a missing array each fail").toBeGreaterThanOrEqual(2);
  expect(agent.state).not.toHaveProperty("selectedLayer");
  expect(agent.state).not.toHaveProperty("ui");
});

/**
 * Runs each agent once, all at the same time, each with its forwardedProps;
 * returns what @ag-ui/client said meanwhile, as runCollecting does (one spy
 * for all: runCollecting's own would be replaced by the next one's).
 */
async function runAllCollecting(runs: { agent: HttpAgent; runId: string; forwardedProps: JsonObject; onEvent: (n: number) => void }[]): Promise<string[]> {
  const said: string[] = [];
  const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void said.push(`warn: ${String(a[0])}`));
  const error = vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void said.push(`error: ${String(a[0])}`));
  try {
    await Promise.all(
      runs.map(({ agent, runId, forwardedProps, onEvent }) => {
        let n = 0;
        return agent.runAgent({ runId, forwardedProps }, { onEvent: () => void onEvent(++n) });
      }),
    );
  } finally {
    warn.mockRestore();
    error.mockRestore();
  }
  return said;
}

stack.test("the sidecar starts with the app (lifespan), before any request; with the lifespan off, on the first stream", async () => {
  const on = await startServer("on");
  expect(sidecarsOf(on.child.pid), "running once uvicorn has started").toHaveLength(1);
  const started = sidecarsOf(on.child.pid);
  await repairedRuns(on.url, ["r1"]);
  expect(sidecarsOf(on.child.pid), "the first stream ran on it").toEqual(started);
  on.child.kill("SIGTERM");
  expect((await on.child.waitForExit(WAIT_MS)).code, "a clean shutdown (the sidecar closed in it)").toBe(0);
  expect(on.child.stderr).toBe("");

  const off = await startServer("off");
  expect(sidecarsOf(off.child.pid), "nothing started without a lifespan").toEqual([]);
  await repairedRuns(off.url, ["r1"]);
  expect(sidecarsOf(off.child.pid), "started by the first stream").toHaveLength(1);

  // An app that knows only HTTP (it raises on the lifespan scope): the middleware answers the lifespan
  // itself, so uvicorn starts (with "on", an app that raises there fails its startup) and the sidecar runs.
  for (const lifespan of ["on", "auto"] as const) {
    const bare = await startServer(lifespan, "--app-without-lifespan");
    expect(sidecarsOf(bare.child.pid), `lifespan ${lifespan}: running once uvicorn has started`).toHaveLength(1);
    await repairedRuns(bare.url, ["r1"]);
    bare.child.kill("SIGTERM");
    expect((await bare.child.waitForExit(WAIT_MS)).code).toBe(0);
    expect(bare.child.stderr).toBe("");
  }
});

stack.test("kill -9 of the sidecar mid-stream, three responses on it: it is started again, each stream resumes repaired, the client's keys survive, nothing warns", async () => {
  const { url, port, child } = await startServer();
  const before = sidecarsOf(child.pid);
  expect(before, "one sidecar, started with the app").toHaveLength(1);

  const k = 3; // each agent's run stops after these events until released: RUN_STARTED, a snapshot, a delta
  const runIds = ["k1", "k2", "k3"];
  const agents = runIds.map(() => new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) }));
  const gated = runIds.map(() => {
    let reached = (): void => undefined;
    return { reached: new Promise<void>((resolve) => (reached = resolve)), onEvent: (n: number) => void (n === k && reached()) };
  });
  const runs = runAllCollecting(agents.map((agent, i) => ({ agent, runId: runIds[i] as string, forwardedProps: { gate: k }, onEvent: (gated[i] as (typeof gated)[number]).onEvent })));
  await Promise.all(gated.map((g) => g.reached)); // every client holds its first k events, repaired
  process.kill(before[0] as number, "SIGKILL");
  for (const runId of runIds) await post(`${url}/release/${runId}`, "").done;
  expect(await runs, "no warning from any client").toEqual([]);

  // Each client ends exactly where fix takes the whole stream, the events after the kill repaired too.
  for (const [i, agent] of agents.entries()) {
    const runId = runIds[i] as string;
    const sent = await post(`${url}/raw`, runInput(CLIENT_KEYS, runId)).done;
    expect(sent.split("STATE_SNAPSHOT").length - 1, "snapshots after the kill").toBeGreaterThan(1);
    expect(agent.state, runId).toEqual(replayState(CLIENT_KEYS, await fix(sent, CLIENT_KEYS)));
    expect(agent.state, runId).toMatchObject(CLIENT_KEYS);
  }
  const after = sidecarsOf(child.pid);
  expect(after, "one new sidecar for the three streams").toHaveLength(1);
  expect(after[0]).not.toBe(before[0]);
  const log = child.stderr.trim().split("\n");
  expect(log.filter((l) => l.includes("sidecar died"))).toEqual(["WARNING agui_state.asgi: agui-state sidecar died (agui-state exited with status -9 (signal SIGKILL)); starting a new one"]);
  expect(log.filter((l) => l.includes("restarted"))).toEqual([`WARNING agui_state.asgi: agui-state sidecar restarted (pid ${after[0]})`]);
  expect(log.filter((l) => l.includes("resumes")).map((l) => l.replace(/\d+ bytes/, "N bytes"))).toEqual(runIds.map(() => "WARNING agui_state.asgi: /agent: the stream resumes on the new agui-state sidecar, its mirror rebuilt from the N bytes answered for"));
  expect(log).toHaveLength(5);
  expect(child.stdout.toString("utf8"), "the server's stdout holds only its own line").toBe(`listening on ${port}\n`);

  // The next runs of the same clients are repaired on the new sidecar.
  for (const [i, agent] of agents.entries()) {
    const state = structuredClone(agent.state) as JsonObject;
    expect(await runCollecting(agent, `n${i}`)).toEqual([]);
    expect(agent.state).toEqual(replayState(state, await fix(await post(`${url}/raw`, runInput(state, `n${i}`)).done, state)));
    expect(agent.state).toMatchObject(CLIENT_KEYS);
  }
  expect(sidecarsOf(child.pid)).toEqual(after);
});
