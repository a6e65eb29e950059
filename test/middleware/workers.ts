import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { expect } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { freePort } from "../../scripts/harness/ports.js";
import { BINARY, SEA, run, start, type Sidecar } from "../../scripts/harness/process.js";
import { sidecarsServing, socketAddress } from "./shared-sidecar.js";

/**
 * What test/middleware/python-workers.test.ts starts and reads: `uvicorn --workers 4` serving
 * test/middleware/workers_app.py, the host's shared sidecar (`agui-state serve --listen`, or the one a worker
 * starts), the processes in /proc (which worker, which sidecar), and `agui-state fix` as the oracle. Every
 * process a test starts is found again by its tree or its socket and killed by `killEverything`, since the
 * harness's own kill reaches only direct children: uvicorn's workers and a detached sidecar outlive their parent.
 */

export const PYTHON = "/usr/bin/python3";
const APP_DIR = path.join(ROOT, "test/middleware");
const FLAGS = ["--own", "/toolState", "--join-keys"];

/** A directory of the test's own, short enough for a socket path, and what lives in it. */
export interface Place {
  dir: string;
  socket: string;
  address: string;
  hits: string;
}

/** The addresses of the tests' sockets, each in a directory of its own. */
const places: string[] = [];
const roots: [number, string][] = [];
/** Every process found under a root once it started, with its command line: killed by pid even if its parent is gone by then, but only while the pid is still that process (a pid is reused). */
const known = new Map<number, string>();
const argvOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
};

export function place(): Place {
  const { address, dir } = socketAddress();
  places.push(address);
  return { dir, socket: path.join(dir, "s.sock"), address, hits: path.join(dir, "hits") };
}

/** Each pid's parent, as /proc has it now. */
function processes(): { pid: number; ppid: number }[] {
  const found = [];
  for (const p of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, "utf8");
      found.push({ pid: Number(p), ppid: Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Connections open to the sidecar on `socket`: its accepted sockets, connected (state 03) and bound to the path, in /proc/net/unix. */
export function connectionsTo(socket: string): number {
  return readFileSync("/proc/net/unix", "utf8")
    .split("\n")
    .filter((l) => l.endsWith(` ${socket}`) && l.trim().split(/\s+/)[5] === "03").length;
}

/** `pid` and every process below it. */
function tree(pid: number): number[] {
  const all = processes();
  const out = [pid];
  for (let i = 0; i < out.length; i++) for (const p of all) if (p.ppid === out[i]) out.push(p.pid);
  return out;
}

export interface Workers {
  master: Sidecar;
  port: number;
  url: string;
}

/** `uvicorn --workers 4` on a free port of 127.0.0.1, once each worker has run its lifespan startup (the middleware connected, or started its sidecar). */
export async function startWorkers(where: Place, env: Record<string, string> = {}): Promise<Workers> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const args = ["-m", "uvicorn", "workers_app:app", "--app-dir", APP_DIR, "--workers", "4", "--host", "127.0.0.1", "--port", String(port), "--log-level", "info", "--no-access-log"];
    const master = start({ name: "uvicorn --workers 4 (workers_app.py)", file: PYTHON, args }, [], { AGUI_STATE_BIN: BINARY, PYTHONDONTWRITEBYTECODE: "1", WORKERS_APP_HITS: where.hits, ...env });
    roots.push([master.pid, argvOf(master.pid)]);
    const started = () => (master.stderr.match(/Application startup complete\./g) ?? []).length;
    try {
      await master.until(() => started() >= 4, "the 4 workers' startup", 60_000);
      for (const pid of tree(master.pid)) known.set(pid, argvOf(pid));
      return { master, port, url: `http://127.0.0.1:${port}` };
    } catch (e) {
      if (attempt === 3 || !/address already in use/i.test(master.stderr)) throw e;
    }
  }
}

/** The lines the workers logged at WARNING or above (the middleware's, and any traceback), uvicorn's INFO lines left out. */
export function warnings(w: Workers): string[] {
  return w.master.stderr.split("\n").filter((l) => /^(WARNING|ERROR|CRITICAL)|Traceback/.test(l));
}

/** Stops uvicorn as a process manager does (SIGTERM: each worker's lifespan shutdown runs), and waits for it. */
export async function stopWorkers(w: Workers): Promise<void> {
  w.master.kill("SIGTERM");
  await w.master.waitForExit(60_000);
}

/** SIGKILLs every process the tests started (uvicorn, its workers, every sidecar under them or on a test's socket) and removes the tests' directories. */
export function killEverything(): void {
  const victims = new Set<number>([...known].filter(([pid, argv]) => argvOf(pid) === argv).map(([pid]) => pid));
  known.clear();
  for (const [root, argv] of roots.splice(0)) if (argvOf(root) === argv) for (const pid of tree(root)) victims.add(pid);
  for (const address of places) for (const pid of sidecarsServing(address)) victims.add(pid);
  for (const pid of victims) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
  for (const address of places.splice(0)) rmSync(path.dirname(address.slice("unix:".length)), { recursive: true, force: true });
}

/** `agui-state serve --listen unix:SOCKET`, started by the test (as a process manager would), once it listens. */
export async function serve(where: Place): Promise<Sidecar> {
  const s = start(SEA, ["serve", "--listen", where.address]);
  roots.push([s.pid, argvOf(s.pid)]);
  await s.until(() => s.stdout.toString("utf8") === `listening on ${where.address}\n`, "the shared sidecar to listen");
  return s;
}

/** Waits for `test()` (a hang guard, never what a test asserts). */
export async function until(test: () => boolean, what: string, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The runs that reached the app at /agent with this runId, counted over every worker. */
export function hits(where: Place, runId: string): number {
  try {
    return readFileSync(where.hits, "utf8").split("\n").filter((l) => l === runId).length;
  } catch {
    return 0;
  }
}

/** Lets every run held at its gate file go on. */
export const open = (gateFile: string): void => writeFileSync(gateFile, "");

export const runInput = (threadId: string, runId: string, state: JsonObject, forwardedProps: JsonObject = {}): string =>
  JSON.stringify({ threadId, runId, state, messages: [], tools: [], context: [], forwardedProps });

/**
 * A POST's whole answer, read as text, with the worker that answered it. Each on a connection of its own
 * (as `reading`): a kept-alive one could be to a worker `keepOff` blocks.
 */
export async function post(url: string, body: string): Promise<{ text: string; pid: number; status: number }> {
  const answer = reading(url, body);
  const text = await answer.done;
  return { text, pid: await answer.pid, status: await answer.status };
}

/** A POST read as it streams, on a connection of its own: its text so far, the worker that answers it and its status, and its whole text at the end. */
export function reading(url: string, body: string): { text: () => string; pid: Promise<number>; status: Promise<number>; done: Promise<string> } {
  let text = "";
  let answered: (res: http.IncomingMessage) => void = () => undefined;
  const head = new Promise<http.IncomingMessage>((resolve) => (answered = resolve));
  const done = new Promise<string>((resolve, reject) => {
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, agent: false }, (res) => {
      answered(res);
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => resolve(text));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
  return { text: () => text, pid: head.then((res) => Number(res.headers["x-worker-pid"])), status: head.then((res) => res.statusCode ?? 0), done };
}

/** How many POST /busy keepOff has sent: each frees its worker when a file of its own appears. */
let occupations = 0;

/**
 * Keeps a worker that took connections so far from taking the next ones. uvicorn's workers share
 * one listening socket: each wakes on a connection, and the first to run accepts every one waiting (asyncio
 * accepts up to its backlog at once), so on a fast idle machine one worker can take them all, batch after
 * batch. A worker blocked in POST /busy (workers_app.py) accepts nothing: workers are occupied until one of
 * `taken` is (at most one per worker, since an occupied worker takes no second one), the others are freed,
 * and what is returned frees that one. Done even when `taken` names several, so that this path always runs.
 */
export async function keepOff(w: Workers, where: Place, taken: ReadonlySet<number>): Promise<() => Promise<void>> {
  const occupied: { pid: number; free: () => Promise<void> }[] = [];
  for (let n = 0; n < 4; n++) {
    const file = path.join(where.dir, `free-${String(++occupations)}`);
    const busy = reading(`${w.url}/busy`, JSON.stringify({ file }));
    const pid = await busy.pid;
    const free = async (): Promise<void> => {
      open(file);
      expect(await busy.done).toBe("busy\nfree\n");
    };
    if (taken.has(pid)) {
      for (const other of occupied) await other.free();
      return free;
    }
    occupied.push({ pid, free });
  }
  throw new Error(`4 workers occupied, none of them ${[...taken].join(", ")}`);
}

/** `agui-state fix` with the middleware's flags over a stream as the agent sent it: the sidecar's view. */
export async function fix(where: Place, stream: string, state: JsonObject): Promise<string> {
  const file = path.join(where.dir, "state.json");
  writeFileSync(file, JSON.stringify(state));
  const r = await run(SEA, ["fix", "--state", file, ...FLAGS], stream);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.toString("utf8");
}
