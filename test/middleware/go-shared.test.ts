import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterEach, describe, expect, vi } from "vitest";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { sloppyAgent } from "./go-agent.js";
import { BINARY, start, type Sidecar } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { ResumableHttpAgent, resumableFetch } from "../../src/web/resume/index.js";
import { readToFailure } from "../resume/failing-body.js";
import { Relay } from "../resume/relay.js";

/**
 * Issue 42, Go: one sidecar per host (protocol/README.md §2, "One sidecar per host"). Three net/http
 * server processes (clients/go/examples/sloppyagent, aguistate.NewMiddleware, resume on, the memory
 * store) connect to one `agui-state serve --listen unix:PATH`, named in AGUI_STATE_SIDECAR:
 * - the real @ag-ui/client, cut mid-run on one process, rejoins on another through a TCP relay that
 *   sends each new connection to the next process, and ends exactly as a client that was never cut;
 *   with a sidecar per process (the negative control) the same rejoin is refused (410);
 * - in start mode (AGUI_STATE_SIDECAR_START=1) the three, started at once, leave one sidecar serving;
 *   killed with runs in flight on every process, it is started again, each run is repaired to its end
 *   with nothing lost, and the runs after are repaired too.
 * Every process a test starts is killed at its end: the servers by the harness's registry, a sidecar
 * the servers started (detached, so not the harness's child) by its pid, found by its command line.
 */
const { test } = toolchain("Go (golang-go)", ["go", "version"]);

const CLIENT_KEYS = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };

const agent = sloppyAgent("agui-go-shared-");
const closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

interface Server {
  child: Sidecar;
  url: string;
  port: number;
}

/** A socket path of the test's own, short enough for a Unix socket's name. */
function socketPath(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "agui-sh-"));
  closers.push(() => rmSync(dir, { recursive: true, force: true }));
  return path.join(dir, "s.sock");
}

/** The live sidecars (zombies have no command line) serving `unix:sock`, by their command lines. */
function sidecarsAt(sock: string): number[] {
  const want = `\0serve\0--listen\0unix:${sock}\0`;
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/cmdline`, "latin1").includes(want);
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

/** Kills, at the test's end, every sidecar serving `sock` (one the servers started outlives them). */
function killSidecarsAtEnd(sock: string): void {
  closers.push(() => {
    for (const pid of sidecarsAt(sock)) process.kill(pid, "SIGKILL");
  });
}

/** Polls until `holds()`; past `ms` it fails: a guard against a hang, never what a test asserts. */
async function until(holds: () => boolean, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!holds()) {
    if (Date.now() > end) throw new Error(`never: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The sidecar a process manager would run: `serve --listen unix:sock`, once it listens (the registry kills it). */
async function serveShared(sock: string): Promise<Sidecar> {
  const child = start({ name: "shared sidecar", file: BINARY, args: [] }, ["serve", "--listen", `unix:${sock}`]);
  await child.until(() => child.stdout.toString("utf8") === `listening on unix:${sock}\n`, "the sidecar listening");
  return child;
}

/** Starts an agent server (the registry kills it after the test) and reads its URL. */
async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const child = start({ name: "sloppyagent", file: agent.exe(), args: [] }, [], { AGUI_STATE_BIN: BINARY, ...env });
  await child.until(() => child.stdout.includes("\n"), "the server's URL", 30_000);
  const url = child.stdout.toString("utf8").trim();
  return { child, url, port: Number(new URL(url).port) };
}

const hits = async (server: Server): Promise<number> => Number(await (await fetch(`${server.url}/hits`)).text());
const requests = async (server: Server): Promise<number> => Number(await (await fetch(`${server.url}/requests`)).text());
async function paused(server: Server, name: string): Promise<void> {
  expect(await (await fetch(`${server.url}/paused?name=${name}`)).text()).toBe("paused");
}
const resume = (server: Server, name: string) => fetch(`${server.url}/resume?name=${name}`, { method: "POST" });
const detached = (server: Server) => server.child.until(() => /^agui-state: \/agent: the client left mid-run; the run goes on for 30s for it to rejoin$/m.test(server.child.stderr), "the detach");
const input = (threadId: string, runId: string): string => JSON.stringify({ threadId, runId, state: CLIENT_KEYS, messages: [], tools: [], context: [], forwardedProps: {} });

/** What a client that was never cut ends with: the plain HttpAgent, straight to the server. */
async function uninterrupted(server: Server, threadId: string, runId: string) {
  const client = new HttpAgent({ url: `${server.url}/agent`, threadId, initialState: structuredClone(CLIENT_KEYS) });
  expect(await runCollecting(client, runId)).toEqual([]);
  return { state: client.state, messages: client.messages };
}

/** A relay whose nth connection goes to the nth server: the cut run to the first, its rejoin to the second. */
async function relayTo(servers: Server[]): Promise<Relay> {
  let next = 0;
  const relay = await Relay.start([{ boundary: 2, extra: 5 }], () => (servers[next++ % servers.length] as Server).port);
  closers.push(() => relay.close());
  return relay;
}

describe("three Go server processes on one sidecar (memory store)", () => {
  test("the real client cut mid-run on one process rejoins on another: the same messages and state as a client never cut, and the handler ran once", async () => {
    const sock = socketPath();
    await serveShared(sock);
    const env = { AGUI_STATE_SIDECAR: `unix:${sock}` };
    const [a, b, c] = await Promise.all([startServer(env), startServer(env), startServer(env)]);
    if (!a || !b || !c) throw new Error("three servers");
    for (const s of [a, b, c]) expect(await (await fetch(`${s.url}/sidecar`)).text()).toBe(`unix:${sock}`);
    const expected = await uninterrupted(c, "u1", "r1");

    const relay = await relayTo([a, b, c]);
    void relay.cut().then(() => detached(a)).then(() => resume(a, "a"));
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=a`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.cutsMade).toBe(1);
    expect(relay.connections).toBe(2);
    expect([await hits(a), await hits(b)]).toEqual([1, 0]); // the run on a; b answered the rejoin from the shared log
    expect(await requests(b)).toBe(1);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);
    expect(client.state).toMatchObject(CLIENT_KEYS);
  }, 180_000);

  test("the negative control, a sidecar per process: the same rejoin on another process is refused (410), and the client's run fails", async () => {
    const [a, b] = await Promise.all([startServer(), startServer()]);
    if (!a || !b) throw new Error("two servers");
    expect(await (await fetch(`${a.url}/sidecar`)).text()).toMatch(/^\d+$/);
    const relay = await relayTo([a, b]);
    void relay.cut().then(() => detached(a)).then(() => resume(a, "n"));
    const asked: number[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      asked.push(res.status);
      return res;
    };
    // resumableFetch is ResumableHttpAgent's fetch, its body read as HttpAgent reads it: HttpAgent rethrows a
    // failed body from its reader's cancel() as an unhandled rejection (test/resume/failing-body.ts).
    const res = await resumableFetch({ fetch: counting, backoffMs: 1 })(`${relay.url}/agent?pause=n`, { method: "POST", headers: { "content-type": "application/json" }, body: input("t2", "r1") });
    const { failed } = await readToFailure(res);
    expect(failed).toBeInstanceOf(Error);
    expect(asked).toEqual([200, 410]);
    expect([await hits(a), await hits(b), await requests(b)]).toEqual([1, 0, 1]);
  }, 180_000);
});

/** Runs every agent at once; what @ag-ui/client said (console.warn and .error) while they ran. */
async function runAll(agents: HttpAgent[], runId: string): Promise<string[]> {
  const said: string[] = [];
  const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void said.push(`warn: ${String(a[0])}`));
  const error = vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void said.push(`error: ${String(a[0])}`));
  try {
    await Promise.all(agents.map((agent) => agent.runAgent({ runId })));
  } finally {
    warn.mockRestore();
    error.mockRestore();
  }
  return said;
}

describe("start mode (AGUI_STATE_SIDECAR_START=1)", () => {
  test("three processes started at once leave one sidecar; killed with runs in flight on every process, it is started again, no run is lost, and the runs after are repaired", async () => {
    const sock = socketPath();
    killSidecarsAtEnd(sock);
    const env = { AGUI_STATE_SIDECAR: `unix:${sock}`, AGUI_STATE_SIDECAR_START: "1" };
    const servers = await Promise.all([startServer(env), startServer(env), startServer(env)]);
    // The starts that lost exit 3 once they find the winner serving.
    await until(() => sidecarsAt(sock).length <= 1, "one sidecar left");
    const [pid] = sidecarsAt(sock);
    expect(sidecarsAt(sock)).toHaveLength(1);
    const expected = await uninterrupted(servers[0] as Server, "u", "r1");

    // 8 runs on each process, each stopped after its 4th event, then the sidecar killed under them.
    const runs = servers.flatMap((server, s) => Array.from({ length: 8 }, (_, i) => ({ server, name: `p${s}-${i}` })));
    const agents = runs.map(({ server, name }) => new HttpAgent({ url: `${server.url}/agent?pause=${name}`, threadId: `t-${name}`, initialState: structuredClone(CLIENT_KEYS) }));
    const done = runAll(agents, "r1");
    await Promise.all(runs.map(({ server, name }) => paused(server, name)));
    process.kill(pid as number, "SIGKILL");
    // Gone, its listening socket with it (the server that started it reaps it): a connection made
    // while a killed process is torn down may be taken, then reset, which would spend a try.
    await until(() => !sidecarsAt(sock).includes(pid as number) && !procExists(pid as number), "the killed sidecar gone");
    await Promise.all(runs.map(({ server, name }) => resume(server, name)));

    expect(await done).toEqual([]);
    for (const agent of agents) {
      expect(agent.state).toEqual(expected.state);
      expect(agent.messages).toEqual(expected.messages);
    }
    // The processes' starts after the kill raced too: those that lost exit 3 once they find the winner
    // serving, which may come after the runs it served have ended.
    await until(() => sidecarsAt(sock).length <= 1, "one sidecar left after the kill");
    const again = sidecarsAt(sock);
    expect(again).toHaveLength(1);
    expect(again).not.toContain(pid);
    for (const server of servers) {
      const log = server.child.stderr;
      expect(log.match(/^agui-state: the connection to the sidecar ended \(.*\); connected to unix:\S+ again$/gm)).toHaveLength(1);
      expect(log.match(/^agui-state: \/agent: the stream was opened again on the new sidecar, and the \d+ bytes it had repaired fed to it again: the repair goes on$/gm)).toHaveLength(8);
      expect(log).not.toMatch(/unrepaired|could not/);
    }

    // The runs after: one on each process, repaired on the new sidecar.
    for (const [s, server] of servers.entries()) {
      const next = await uninterrupted(server, `after-${s}`, "r1");
      expect(next).toEqual(expected);
    }
    expect(sidecarsAt(sock)).toEqual(again);
  }, 180_000);
});

/** Whether the pid names a process, a zombie included (a sidecar a server started and has not reaped). */
function procExists(pid: number): boolean {
  try {
    readFileSync(`/proc/${pid}/stat`);
    return true;
  } catch {
    return false;
  }
}
