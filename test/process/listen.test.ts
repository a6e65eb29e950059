import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync, existsSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { BINARY, childEnv } from "../../scripts/harness/process.js";
import { Connection, Listening } from "../../scripts/harness/listen.js";

/**
 * `serve --listen` (protocol/README.md §2, "One sidecar per host"), through the real binary: every
 * connection shares one state; a connection that ends releases what it opened; the socket is the
 * owner's alone; a second start never takes the socket from a live sidecar.
 */
const work = mkdtempSync(path.join(tmpdir(), "agui-listen-"));
const started: Listening[] = [];
const connections: Connection[] = [];
afterEach(async () => {
  for (const c of connections.splice(0)) c.socket.destroy();
  await Promise.all(started.splice(0).map((s) => s.stop("SIGKILL")));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

let n = 0;
const socketPath = (): string => path.join(work, `s${++n}.sock`);

async function serving(args: string[] = [], at = socketPath()): Promise<{ sidecar: Listening; address: string; path: string }> {
  const sidecar = Listening.start(["--listen", `unix:${at}`, ...args]);
  started.push(sidecar);
  const address = await sidecar.ready;
  if (address === undefined) throw new Error(`it did not listen: ${sidecar.stderr}`);
  return { sidecar, address, path: at };
}

async function open(at: string): Promise<Connection> {
  const c = await Connection.open(at);
  connections.push(c);
  return c;
}

const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;
const RESUME = { threadId: "t1", path: "/agent", authorization: "Bearer a" };
const idOf = (text: string): string => /^id: (.*)$/m.exec(text)?.[1] ?? "";

describe("serve --listen unix:PATH", () => {
  it("says where it listens on stdout, in one line and nothing else, and makes the socket its owner's alone (0600)", async () => {
    const { sidecar, address, path: at } = await serving();
    expect(address).toBe(`unix:${at}`);
    expect(statSync(at).isSocket()).toBe(true);
    expect(statSync(at).mode & 0o777).toBe(0o600);
    const c = await open(at);
    expect(await c.result("escapePointer", { path: ["toolState", "raster-ops/dataset"] })).toEqual({ pointer: "/toolState/raster-ops~1dataset" });
    await c.end();
    expect(await sidecar.stop()).toBe(0);
    expect(sidecar.stdout).toBe(`listening on unix:${at}\n`);
    // Stopped, it removes its socket: the next start finds the path free.
    expect(existsSync(at)).toBe(false);
  });

  it("shares threads and streams between connections: what one worker opens, another reaches", async () => {
    const { path: at } = await serving();
    const [a, b] = [await open(at), await open(at)];
    await a.result("openRun", { threadId: "t1", state: { todos: [] } });
    await b.result("applyOps", { threadId: "t1", ops: [{ op: "add", path: "/todos/-", value: "milk" }] });
    expect(await a.result("getState", { threadId: "t1" })).toMatchObject({ state: { todos: ["milk"] } });
    const { streamId } = await a.result<{ streamId: string }>("openStream", { state: {} });
    const fixed = await b.result<{ text: string }>("fixStream", { streamId, text: sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }) });
    expect(fixed.text).toBe(sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }));
    // `requests` is the asking connection's own; what the process holds is everyone's.
    expect(await b.result("stats")).toMatchObject({ requests: 3, threads: 1, streams: 1 });
  });

  it("a rejoin on one connection reads the run another connection's stream records, to its end", async () => {
    const { path: at } = await serving();
    const [worker1, worker2] = [await open(at), await open(at)];
    const { streamId } = await worker1.result<{ streamId: string }>("openStream", { state: {}, resume: RESUME });
    const first = (await worker1.result<{ text: string }>("fixStream", { streamId, text: sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }) })).text;
    const { readId } = await worker2.result<{ readId: string }>("rejoinStream", { ...RESUME, lastEventId: idOf(first) });
    const rest = (await worker1.result<{ text: string }>("fixStream", { streamId, text: sse({ type: "RUN_FINISHED", threadId: "t1", runId: "r1" }) })).text;
    await worker1.result("closeStream", { streamId });
    let text = "";
    for (;;) {
      const r = await worker2.result<{ text: string; done: boolean; end?: string }>("readRejoin", { readId, waitMs: 2000 });
      text += r.text;
      if (r.done) {
        expect(r.end).toBe("finished");
        break;
      }
    }
    expect(text).toBe(rest);
  });

  it("a connection that ends releases its streams: a resumable run ends cancelled, its rejoin with it, and others' streams stand", async () => {
    const { path: at } = await serving();
    const [dying, other, reader] = [await open(at), await open(at), await open(at)];
    const { streamId } = await dying.result<{ streamId: string }>("openStream", { state: {}, resume: RESUME });
    const first = (await dying.result<{ text: string }>("fixStream", { streamId, text: sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }) })).text;
    const kept = (await other.result<{ streamId: string }>("openStream", { state: {} })).streamId;
    const { readId } = await reader.result<{ readId: string }>("rejoinStream", { ...RESUME, lastEventId: idOf(first) });
    const waiting = reader.result<{ done: boolean; end?: string }>("readRejoin", { readId, waitMs: 30_000 });
    dying.socket.destroy();
    // The reader was waiting on a run no one can feed any more: it ends, cancelled, not after its 30 s wait.
    expect(await waiting).toMatchObject({ done: true, end: "cancelled" });
    expect(await other.call("fixStream", { streamId, text: "" })).toMatchObject({ error: { code: -32006, data: { code: "UNKNOWN_STREAM", streamId, reason: "closed" } } });
    expect(await other.result("fixStream", { streamId: kept, text: "" })).toMatchObject({ text: "" });
    expect(await other.result("stats")).toMatchObject({ streams: 1, reads: 0 });
  });

  it("a connection broken off mid-message, or sending garbage, costs the others nothing", async () => {
    const { path: at } = await serving();
    const [good, bad] = [await open(at), await open(at)];
    await good.result("openRun", { threadId: "t1", state: { n: 1 } });
    bad.socket.write('{"jsonrpc":"2.0","id":1,"method":"applyOps","params":{"threadId":"t1","ops":[{"op":"rep');
    bad.socket.destroy();
    const g = await open(at);
    g.socket.write("hello\n");
    expect(await g.result("getState", { threadId: "t1" })).toMatchObject({ state: { n: 1 } });
    expect(await good.result("getState", { threadId: "t1" })).toMatchObject({ state: { n: 1 } });
  });

  it("refuses a socket a live sidecar serves (exit 3, apart from a refusal's 2; one line), and the live one keeps serving", async () => {
    const { path: at } = await serving();
    const second = spawnSync(BINARY, ["serve", "--listen", `unix:${at}`], { env: childEnv(), timeout: 15_000 });
    expect(second.status).toBe(3);
    expect(second.stdout.toString()).toBe("");
    expect(second.stderr.toString()).toBe(`agui-state: cannot listen on unix:${at}: a sidecar is serving there already\n`);
    const c = await open(at);
    expect(await c.result("escapePointer", { path: ["a"] })).toEqual({ pointer: "/a" });
  });

  it("takes over a dead sidecar's socket, and leaves anything else at the path alone", async () => {
    const stale = socketPath();
    // A socket file nobody answers on: bound, never listened on, and left behind (Python does not remove it).
    expect(spawnSync("python3", ["-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", stale]).status).toBe(0);
    expect(statSync(stale).isSocket()).toBe(true);
    const { address } = await serving([], stale);
    expect(address).toBe(`unix:${stale}`);

    const file = path.join(work, "not-a-socket");
    writeFileSync(file, "mine");
    const r = spawnSync(BINARY, ["serve", "--listen", `unix:${file}`], { env: childEnv(), timeout: 15_000 });
    expect([r.status, r.stderr.toString()]).toEqual([2, `agui-state: cannot listen on unix:${file}: something other than a socket is there; it is left alone\n`]);
    expect(readFileSync(file, "utf8")).toBe("mine");
  });

  it("takes over a socket that accepts but never answers (a sidecar being killed, or hung): accepting is not serving", async () => {
    const at = socketPath();
    const mute = createServer(() => undefined);
    await new Promise<void>((r) => mute.listen(at, r));
    try {
      const { address } = await serving([], at);
      const c = await open(at);
      expect(await c.result("escapePointer", { path: ["a"] })).toEqual({ pointer: "/a" });
      expect(address).toBe(`unix:${at}`);
    } finally {
      mute.close();
    }
  });

  it("of four started at once on one path, exactly one serves; the others exit 3", async () => {
    const at = socketPath();
    const four = [0, 1, 2, 3].map(() => Listening.start(["--listen", `unix:${at}`]));
    started.push(...four);
    const addresses = await Promise.all(four.map((s) => s.ready));
    expect(addresses.filter((a) => a !== undefined)).toEqual([`unix:${at}`]);
    const losers = four.filter((_, i) => addresses[i] === undefined);
    expect(await Promise.all(losers.map((s) => s.exited))).toEqual([3, 3, 3]);
    const c = await open(at);
    expect(await c.result("escapePointer", { path: ["a"] })).toEqual({ pointer: "/a" });
    expect(existsSync(`${at}.lock`)).toBe(false);
  });

  it("--exit-idle: an open connection keeps it serving; once the last has closed it exits 0 and removes its socket", async () => {
    const { sidecar, path: at } = await serving(["--exit-idle", "2000"]);
    const c = await open(at);
    // Longer than --exit-idle with a connection open: still serving.
    await new Promise((r) => setTimeout(r, 2500));
    expect(await c.result("escapePointer", { path: ["a"] })).toEqual({ pointer: "/a" });
    await c.end();
    expect(await sidecar.exited).toBe(0);
    expect(existsSync(at)).toBe(false);
  });

  it("--exit-idle: one that nobody ever connects to exits too (a worker that started it and died)", async () => {
    const { sidecar, path: at } = await serving(["--exit-idle", "1"]);
    expect(await sidecar.exited).toBe(0);
    expect(existsSync(at)).toBe(false);
  });

  it("SIGTERM with a request in flight: it is answered, then the process exits 0", async () => {
    const { sidecar, path: at } = await serving();
    const c = await open(at);
    await c.result("openRun", { threadId: "t1", state: {} });
    const answered = c.result("getState", { threadId: "t1" });
    sidecar.child.kill("SIGTERM");
    expect(await answered).toMatchObject({ state: {} });
    expect(await sidecar.exited).toBe(0);
  });
});

describe("serve --listen tcp:HOST:PORT", () => {
  it("listens on a loopback port (0 picks one) and serves as the socket does", async () => {
    const sidecar = Listening.start(["--listen", "tcp:127.0.0.1:0"]);
    started.push(sidecar);
    const address = (await sidecar.ready) as string;
    expect(address).toMatch(/^tcp:127\.0\.0\.1:\d+$/);
    const c = await open(address);
    expect(await c.result("escapePointer", { path: ["a~b"] })).toEqual({ pointer: "/a~0b" });
  });

  it("refuses an address beyond the host, and a bad address, at start (usage error, exit 2)", () => {
    for (const [args, says] of [
      [["--listen", "tcp:0.0.0.0:7000"], "0.0.0.0 is not a loopback address"],
      [["--listen", "tcp:10.0.0.1:7000"], "10.0.0.1 is not a loopback address"],
      [["--listen", "/tmp/x.sock"], 'expected unix:PATH or tcp:HOST:PORT, got "/tmp/x.sock"'],
      [["--listen", "unix:"], "unix: needs a path"],
      [["--listen", `unix:/${"x".repeat(120)}`], "over the 103 a Unix socket's name can hold"],
      [["--exit-idle", "5"], "--exit-idle needs --listen"],
    ] as const) {
      const r = spawnSync(BINARY, ["serve", ...args], { env: childEnv(), timeout: 15_000 });
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stdout.toString()).toBe("");
      expect(r.stderr.toString(), args.join(" ")).toContain(says);
    }
  });
});
