import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterEach, describe, expect, vi } from "vitest";
import { expectBrokenRejoins, pausingServer } from "../resume/broken-rejoin.js";
import { expectOnlyRequester } from "../resume/refusals.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, start, type Sidecar } from "../../scripts/harness/process.js";
import { redis, startRedis } from "../../scripts/harness/redis.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { ResumableHttpAgent } from "../../src/web/resume/index.js";
import { OPENING } from "../../scripts/harness/sse-ids.js";
import { cutName, Relay, type Cut } from "../resume/relay.js";
import { expectRejoinedFromOpening } from "../resume/from-opening.js";

/**
 * Issue 34 item 8, Python: resume through AguiStateMiddleware (protocol/README.md §16), with the sidecar
 * keeping the runs. A real uvicorn serving FastAPI (clients/python/examples/middleware_server.py: its agent
 * writes 4 events, then waits under ?pause=NAME until the test lets it go on) behind a TCP relay that cuts
 * the client's connection at an event boundary or inside an event while the run is live. The real
 * @ag-ui/client HttpAgent with the resume module's fetch (ResumableHttpAgent) must end on exactly the
 * messages and state of a client that was never cut, with no warning, and the app must have run once: the
 * rejoin is served from the sidecar's run log, never by the app.
 */
const PYTHON = "/usr/bin/python3";
const stack = toolchain("Python middleware (Debian python3-fastapi, python3-starlette, python3-uvicorn)", [PYTHON, "-c", "import fastapi, starlette, uvicorn"]);
const test = stack.test;
const SERVER = path.join(ROOT, "clients/python/examples/middleware_server.py");
const CLIENT_KEYS = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

interface Server {
  child: Sidecar;
  url: string;
  port: number;
}

/** Starts uvicorn with the middleware (the kill registry ends it after the test) and reads its port; `env` goes to its sidecar too. */
async function startServer(...flags: string[]): Promise<Server> {
  return startServerWith({}, ...flags);
}

async function startServerWith(env: Record<string, string>, ...flags: string[]): Promise<Server> {
  const child = start({ name: "uvicorn (middleware_server.py)", file: PYTHON, args: [SERVER, ...flags] }, [], { AGUI_STATE_BIN: BINARY, PYTHONDONTWRITEBYTECODE: "1", ...env });
  await child.until(() => /listening on \d+\n/.test(child.stdout.toString("utf8")), "the server to listen", 30_000);
  const port = Number(/listening on (\d+)/.exec(child.stdout.toString("utf8"))?.[1]);
  return { child, url: `http://127.0.0.1:${port}`, port };
}

async function relayTo(cuts: Cut[], ...servers: Server[]): Promise<Relay> {
  let next = 0;
  const relay = await Relay.start(cuts, () => (servers[next++ % servers.length] as Server).port);
  closers.push(() => relay.close());
  return relay;
}

const hits = async (server: Server): Promise<number> => Number(await (await fetch(`${server.url}/hits`)).json());
async function paused(server: Server, name: string): Promise<void> {
  expect(await (await fetch(`${server.url}/paused?name=${name}`)).json()).toBe("paused");
}
const resume = (server: Server, name: string) => fetch(`${server.url}/resume?name=${name}`, { method: "POST" });

const input = (threadId: string, runId: string, state: object = {}): string => JSON.stringify({ threadId, runId, state, messages: [], tools: [], context: [], forwardedProps: {} });

/** What a client that was never cut ends with: the plain HttpAgent, straight to the server. */
async function uninterrupted(server: Server, threadId: string, runId: string) {
  const client = new HttpAgent({ url: `${server.url}/agent`, threadId, initialState: structuredClone(CLIENT_KEYS) });
  expect(await runCollecting(client, runId)).toEqual([]);
  return { state: client.state, messages: client.messages };
}

/** A credential (§16: by default the Authorization header): a run reloads only for the credential that started it. */
const ALICE = { authorization: "Bearer alice" };

/** A run read with the plain fetch: a page without the resume module, or one closed mid-run. */
async function readAll(url: string, body: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", ...headers }, body });
  return res.text();
}

/** Reads a response's first `n` events (after its opening id block, §16), then lets go of it (the client leaves); returns their ids. */
async function firstEvents(res: Response, n: number): Promise<string[]> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = "";
  const events = () => text.replace(OPENING, "");
  while ((events().match(/\n\n/g) ?? []).length < n) {
    const chunk = await reader.read();
    if (chunk.done) throw new Error(`the answer ended early: ${text}`);
    text += new TextDecoder().decode(chunk.value);
  }
  await reader.cancel();
  expect(text).toMatch(OPENING);
  return [...events().matchAll(/^id: (.+)$/gm)].map((m) => m[1] as string);
}

describe("a dropped stream continues where it stopped (Python middleware under uvicorn, memory store)", () => {
  // At event boundaries and inside events, all within what the middleware forwards before the agent's
  // pause: its first four events repair to three (the second snapshot moves nothing, so nothing is sent).
  // The first two before the first event, where only the opening block's id can rejoin (§16).
  const cuts: Cut[] = [
    { boundary: 0, extra: 0 },
    { boundary: 0, extra: 30 },
    { boundary: 1, extra: 0 },
    { boundary: 1, extra: 40 },
    { boundary: 2, extra: 9 },
    { boundary: 3, extra: 0 },
  ];
  for (const cut of cuts) {
    test(`cut ${cutName(cut)}: the same messages and state, the app ran once, nothing warned`, async () => {
      const server = await startServer();
      const expected = await uninterrupted(server, "u1", "r1");
      const before = await hits(server);

      const relay = await relayTo([cut], server);
      // The rest of the run is written only once the cut is made: the rejoin gets what it missed from
      // the log, and the rest live, as the detached app writes it.
      void relay.cut().then(() => resume(server, "a"));
      const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=a`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1 } });
      expect(await runCollecting(client, "r1")).toEqual([]);
      expect(relay.cutsMade).toBe(1);
      expect(relay.connections).toBe(2);
      expect(await hits(server)).toBe(before + 1);
      expect(client.state).toEqual(expected.state);
      expect(client.messages).toEqual(expected.messages);
      expect(client.state).toMatchObject(CLIENT_KEYS);
      expect(server.child.stderr, "no warning in the server's log").toBe("");
    }, 120_000);
  }

  test("the opening id block goes out before the app's first event: cut right after it while the app holds its first event back, the client rejoins from that id and gets every event", async () => {
    const server = await startServer();
    const expected = await uninterrupted(server, "u0", "r0");
    const before = await hits(server);
    const relay = await relayTo([{ boundary: 0, extra: 0 }], server);
    // The app writes nothing until the cut is made (forwardedProps.gate 0): were the block held for the
    // first event, the relay would never cut and the run never end.
    void relay.cut().then(() => fetch(`${server.url}/release/r0`, { method: "POST" }));
    const from: string[] = [];
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent`, threadId: "t0", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1, onRetry: ({ lastEventId }) => void from.push(lastEventId) } });
    expect(await runCollecting(client, "r0", { gate: 0 })).toEqual([]);
    expectRejoinedFromOpening(relay, from, (await hits(server)) - before, client, expected);
    expect(server.child.stderr, "no warning in the server's log").toBe("");
  }, 120_000);

  test("cut twice, the second time in the rejoined stream: still the same end", async () => {
    const server = await startServer();
    const expected = await uninterrupted(server, "u2", "r1");
    const relay = await relayTo([{ boundary: 2, extra: 3 }, { boundary: 1, extra: 0 }], server);
    void relay.cut(2).then(() => resume(server, "b"));
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=b`, threadId: "t2", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.cutsMade).toBe(2);
    expect(await hits(server)).toBe(2);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);
    expect(server.child.stderr).toBe("");
  }, 120_000);

  test("without resume (--no-resume: resume=False), no ids: the same cut breaks the response off, and a rejoin reaches the app again (the negative control)", async () => {
    const server = await startServer("--no-resume");
    const relay = await relayTo([{ boundary: 2, extra: 0 }], server);
    void relay.cut().then(() => resume(server, "c"));
    // Read with the plain fetch: @ag-ui/client 1.0.0's HttpAgent rethrows a failed body from its
    // reader's cancel() as an unhandled rejection.
    await expect(readAll(`${relay.url}/agent?pause=c`, input("t3", "r1", CLIENT_KEYS))).rejects.toThrow();
    expect(relay.cutsMade).toBe(1);
    const again = await readAll(`${server.url}/agent`, input("t3", "r1", CLIENT_KEYS), { "last-event-id": "x" });
    expect(again).toMatch(/"type": ?"RUN_STARTED"/);
    expect(again).not.toMatch(/^id: /m);
    expect(await hits(server)).toBe(2);
  }, 120_000);

  test("a reloaded page: connectAgent() lands on the state and messages of the client that never dropped, and the app ran once", async () => {
    const server = await startServer();
    const expected = await uninterrupted(server, "u4", "r1");
    const relay = await relayTo([{ boundary: 2, extra: 0 }], server);
    void relay.cut().then(() => resume(server, "d"));
    // The first page's request is cut and does not resume: the page was closed.
    await expect(readAll(`${relay.url}/agent?pause=d`, input("t4", "r1", CLIENT_KEYS), ALICE)).rejects.toThrow();
    // Without the credential the run started with: nothing to reload (204), and the app is not called.
    const anonymous = await fetch(`${server.url}/agent/connect`, { method: "POST", headers: { "content-type": "application/json" }, body: input("t4", "r1") });
    expect(anonymous.status).toBe(204);
    expect(await anonymous.text()).toBe("");
    // The reloaded page knows only its thread, and presents its credential.
    const reloaded = new ResumableHttpAgent({ url: `${server.url}/agent`, threadId: "t4", initialState: {}, headers: ALICE });
    await reloaded.connectAgent();
    expect(await hits(server)).toBe(2);
    expect(reloaded.state).toEqual(expected.state);
    expect(reloaded.messages).toEqual(expected.messages);
    // A thread with no run: 204, and the app is not called.
    const none = await fetch(`${server.url}/agent/connect`, { method: "POST", headers: { "content-type": "application/json", ...ALICE }, body: input("nobody", "r1") });
    expect(none.status).toBe(204);
    expect(await none.text()).toBe("");
    expect(await hits(server)).toBe(2);
    expect(server.child.stderr).toBe("");
  }, 120_000);
});

describe("detach (Python middleware)", () => {
  test("a client that leaves and never comes back: the app goes on until the grace passes, then it is cancelled; with --detach-grace 0 at once", async () => {
    for (const grace of ["0.2", "0"]) {
      const server = await startServer("--detach-grace", grace);
      const res = await fetch(`${server.url}/agent?pause=g`, { method: "POST", headers: { "content-type": "application/json" }, body: input("t7", "r1") });
      expect((await firstEvents(res, 2)).length).toBeGreaterThanOrEqual(2);
      await paused(server, "g");
      // Answers once the paused app saw its cancel: nobody rejoined the run within the grace.
      expect(await (await fetch(`${server.url}/cancelled?name=g`)).json(), `grace ${grace}`).toBe("cancelled");
      // No error or warning from the app or the middleware: the cancel is not an error of the app. The log
      // may hold the sidecar's INFO line that it cancelled the run (written by the sidecar, whenever).
      // Whole lines only: the server still runs, and a line still being written is not one yet.
      const lines = server.child.stderr.slice(0, server.child.stderr.lastIndexOf("\n") + 1).split("\n").filter((l) => l !== "");
      for (const line of lines) expect((JSON.parse(line) as { level: number; msg: string }).level, `grace ${grace}: ${line}`).toBeLessThanOrEqual(30);
    }
  }, 120_000);
});

describe("only the requester rejoins (Python middleware)", () => {
  test("other credentials, another thread, a forged or unknown id: 410, one answer, and the app is not called; the requester gets the rest", async () => {
    const server = await startServer();
    const body = input("t9", "r1");
    const creds = { authorization: "Bearer alice", cookie: "s=1" };
    const res = await fetch(`${server.url}/agent?pause=e`, { method: "POST", headers: { "content-type": "application/json", ...creds }, body });
    await paused(server, "e");
    const ids = await firstEvents(res, 2);
    expect(ids.length).toBeGreaterThanOrEqual(2);
    expect(new Set(ids).size).toBe(ids.length);
    const last = ids[1] as string;

    await expectOnlyRequester({ url: server.url, body, creds, last, calls: () => hits(server), release: () => resume(server, "e"), whole: () => readAll(`${server.url}/agent`, input("t9b", "r1")) });
    expect(server.child.stderr).toBe("");
  }, 120_000);
});

describe("a run whose app raised (Python middleware under uvicorn)", () => {
  test("lifecycle='repair': the sidecar ends the run with RUN_ERROR INCOMPLETE_STREAM and the response cleanly; the client has a whole failed run, no rejoin; one warning, no traceback", async () => {
    const server = await startServer("--lifecycle", "repair");
    const statuses: number[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      statuses.push(res.status);
      return res;
    };
    const client = new ResumableHttpAgent({ url: `${server.url}/agent?raise=3`, threadId: "t10r", initialState: {}, resume: { backoffMs: 1, fetch: counting } });
    const codes: string[] = [];
    await client.runAgent({ runId: "r1" }, { onRunErrorEvent: ({ event }) => void codes.push(String(event.code)) });
    expect(codes).toEqual(["INCOMPLETE_STREAM"]);
    expect(statuses, "the run only: it ended, so nothing to rejoin").toEqual([200]);
    expect(await hits(server)).toBe(1);
    await server.child.until(() => server.child.stderr.includes("the app raised"), "the middleware's warning", 30_000);
    expect(server.child.stderr).toBe("WARNING agui_state.asgi: /agent: the app raised mid-stream (RuntimeError: the agent failed mid-run); the run was ended with a RUN_ERROR (INCOMPLETE_STREAM)\n");
  }, 120_000);

  test("fails on the client at once: the run and one rejoin reach the server, the rejoin answered 410, then the client errs (lifecycle repair is opt-in: the negative control)", async () => {
    const server = await startServer();
    // The agent writes three events, then raises: uvicorn closes the connection with the answer unended.
    const statuses: number[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      statuses.push(res.status);
      return res;
    };
    const client = new ResumableHttpAgent({ url: `${server.url}/agent?raise=3`, threadId: "t10", initialState: {}, resume: { backoffMs: 1, fetch: counting } });
    // @ag-ui/client 1.0.0 (runHttpRequest) cancels the failed body's reader and rethrows what that cancel
    // rejects with (the body's error) from a promise nobody holds: an unhandled rejection of the library's,
    // after the run already failed. Here a cancel of an errored reader resolves, for this test only.
    const cancel = ReadableStreamDefaultReader.prototype.cancel;
    const handled = vi.spyOn(ReadableStreamDefaultReader.prototype, "cancel").mockImplementation(function (this: ReadableStreamDefaultReader, reason?: unknown) {
      return cancel.call(this, reason).catch(() => undefined);
    });
    try {
      await expect(runCollecting(client, "r1")).rejects.toThrow();
    } finally {
      handled.mockRestore();
    }
    expect(Number(await (await fetch(`${server.url}/requests`)).json()), "the run and one rejoin, not dozens").toBe(2);
    expect(statuses).toEqual([200, 410]);
    expect(await hits(server)).toBe(1);
  }, 120_000);
});

describe("a rejoin cut short (Python middleware under uvicorn)", () => {
  test("a rejoin whose run is evicted mid-answer breaks off, one whose client leaves ends: one line of the middleware's each, no traceback, and uvicorn goes on serving", async () => {
    // 1.5 KiB: the filler run (about 1.3 KiB with its prelude) fits alone, and evicts the paused one.
    const server = await startServer("--log-bytes", "1536", "--verbose");
    await expectBrokenRejoins(
      pausingServer(server.url, server.child),
      { evicted: /^WARNING agui_state\.asgi: \/agent: the rejoin's answer ended early: the run ended evicted$/m, left: /^INFO agui_state\.asgi: \/agent: the rejoin's answer ended early: the client left$/m },
      /Traceback|Exception in ASGI application/,
    );
  }, 120_000);
});

describe("resume across uvicorn servers (Redis)", () => {
  redis.test("two uvicorn servers share a Redis: the relay's rejoin reaches the other one, which serves it from the log without calling its app", async () => {
    const store = await startRedis();
    // One secret for both (§16): a credentialed run is then reloaded through either; rejoins by id need none.
    const secret = { AGUI_STATE_SECRET: "a-test-secret-of-at-least-32-bytes-for-both" };
    const a = await startServerWith(secret, "--store", store.url);
    const b = await startServerWith(secret, "--store", store.url);
    const expected = await uninterrupted(a, "u5", "r1");
    const relay = await relayTo([{ boundary: 2, extra: 5 }], a, b);
    void relay.cut().then(() => resume(a, "f"));
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=f`, threadId: "t5", initialState: structuredClone(CLIENT_KEYS), headers: ALICE, resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.connections).toBe(2);
    expect(await hits(a)).toBe(2); // the uninterrupted run, and this one
    expect(await hits(b)).toBe(0); // the rejoin went to b, and b's app never ran
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);

    // A reload on b, of a run a executed.
    const reloaded = new ResumableHttpAgent({ url: `${b.url}/agent`, threadId: "t5", initialState: {}, headers: ALICE });
    await reloaded.connectAgent();
    expect(reloaded.state).toEqual(expected.state);
    expect(reloaded.messages).toEqual(expected.messages);
    expect(await hits(b)).toBe(0);
    expect(a.child.stderr).toBe("");
    expect(b.child.stderr).toBe("");
  }, 120_000);
});
