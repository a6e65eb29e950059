import { HttpAgent } from "@ag-ui/client";
import { afterEach, describe, expect } from "vitest";
import { expectBrokenRejoins, pausingServer } from "../resume/broken-rejoin.js";
import { expectOnlyRequester } from "../resume/refusals.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { sloppyAgent } from "./go-agent.js";
import { BINARY, start, type Sidecar } from "../../scripts/harness/process.js";
import { redis, startRedis } from "../../scripts/harness/redis.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { ResumableHttpAgent, resumableFetch } from "../../src/web/resume/index.js";
import { OPENING, readFirstEvents } from "../../scripts/harness/sse-ids.js";
import { cutName, Relay, type Cut } from "../resume/relay.js";
import { expectRejoinedFromOpening } from "../resume/from-opening.js";
import { readToFailure } from "../resume/failing-body.js";

/**
 * Issue 34 item 8, Go: resume through aguistate.Middleware (protocol/README.md §16), with the
 * sidecar keeping the runs. A real net/http server (clients/go/examples/sloppyagent: its agent
 * writes 4 events, then waits under ?pause=NAME until the test lets it go on) behind a TCP relay
 * that cuts the client's connection at an event boundary or inside an event while the run is live.
 * The real @ag-ui/client HttpAgent, with the resume module's fetch (ResumableHttpAgent), must end on
 * exactly the messages and state of a client that was never cut, with no warning, and the agent
 * handler must have run once: the rejoin is served from the sidecar's run log, never by the app.
 */
const { test } = toolchain("Go (golang-go)", ["go", "version"]);

const CLIENT_KEYS = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };

const agent = sloppyAgent("agui-mw-go-resume-");
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

interface Server {
  child: Sidecar;
  url: string;
  port: number;
}

/** Starts the agent server (the kill registry ends it after the test) and reads its URL; `env` goes to its sidecar too. */
async function startServer(args: string[] = [], env: Record<string, string> = {}): Promise<Server> {
  const child = start({ name: "sloppyagent", file: agent.exe(), args: [] }, args, { AGUI_STATE_BIN: BINARY, ...env });
  await child.until(() => child.stdout.includes("\n"), "the server's URL");
  const url = child.stdout.toString("utf8").trim();
  return { child, url, port: Number(new URL(url).port) };
}

async function relayTo(cuts: Cut[], ...servers: Server[]): Promise<Relay> {
  let next = 0;
  const relay = await Relay.start(cuts, () => (servers[next++ % servers.length] as Server).port);
  closers.push(() => relay.close());
  return relay;
}

const hits = async (server: Server): Promise<number> => Number(await (await fetch(`${server.url}/hits`)).text());
/** Requests to /agent that reached the server, the ones the middleware answered itself included. */
const requests = async (server: Server): Promise<number> => Number(await (await fetch(`${server.url}/requests`)).text());
/** The credential of the runs a page reloads: an anonymous run is not reloadable (protocol/README.md §16). */
const ALICE = { authorization: "Bearer alice" };
async function paused(server: Server, name: string): Promise<void> {
  expect(await (await fetch(`${server.url}/paused?name=${name}`)).text()).toBe("paused");
}
const resume = (server: Server, name: string) => fetch(`${server.url}/resume?name=${name}`, { method: "POST" });
/** Waits until the middleware has detached the run whose client left (its log line), so that a handler cancelled at the disconnect would have been by then. */
const detached = (server: Server) => server.child.until(() => /^agui-state: \/agent: the client left mid-run; the run goes on for 30s for it to rejoin$/m.test(server.child.stderr), "the detach");

const input = (threadId: string, runId: string, state: object = {}): string => JSON.stringify({ threadId, runId, state, messages: [], tools: [], context: [], forwardedProps: {} });

/** What a client that was never cut ends with: the plain HttpAgent, straight to the server. */
async function uninterrupted(server: Server, threadId: string, runId: string) {
  const client = new HttpAgent({ url: `${server.url}/agent`, threadId, initialState: structuredClone(CLIENT_KEYS), headers: ALICE });
  expect(await runCollecting(client, runId)).toEqual([]);
  return { state: client.state, messages: client.messages };
}

/** A run read with the plain fetch: a page without the resume module, or one closed mid-run. */
async function readAll(url: string, body: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", ...headers }, body });
  return res.text();
}

describe("a dropped stream continues where it stopped (Go middleware, memory store)", () => {
  // At event boundaries and inside events, all within what the agent writes before its pause; the
  // first two before the first event, where only the opening block's id can rejoin (§16).
  const cuts: Cut[] = [
    { boundary: 0, extra: 0 },
    { boundary: 0, extra: 9 },
    { boundary: 1, extra: 0 },
    { boundary: 1, extra: 9 },
    { boundary: 2, extra: 0 },
    { boundary: 2, extra: 30 },
    { boundary: 3, extra: 0 },
  ];
  for (const cut of cuts) {
    test(`cut ${cutName(cut)}: the same messages and state, the handler ran once`, async () => {
      const server = await startServer();
      const expected = await uninterrupted(server, "u1", "r1");
      const before = await hits(server);

      const relay = await relayTo([cut], server);
      // The rest of the run is written only once the cut is made: the rejoin gets what it missed
      // from the log, and the rest live, as the detached handler writes it.
      void relay.cut().then(() => detached(server)).then(() => resume(server, "a"));
      const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=a`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1 } });
      expect(await runCollecting(client, "r1")).toEqual([]);
      expect(relay.cutsMade).toBe(1);
      expect(relay.connections).toBe(2);
      expect(await hits(server)).toBe(before + 1);
      expect(client.state).toEqual(expected.state);
      expect(client.messages).toEqual(expected.messages);
      expect(client.state).toMatchObject(CLIENT_KEYS);
    }, 120_000);
  }

  test("the opening id block goes out right behind the head, before the handler's first event: cut there, the client rejoins from that id and gets every event", async () => {
    const server = await startServer();
    const expected = await uninterrupted(server, "u0", "r1");
    const before = await hits(server);
    const relay = await relayTo([{ boundary: 0, extra: 0 }], server);
    // The handler sends its head and waits before its first event (at=0) until the cut is made: were the
    // block held for the first event, the relay would never cut and the run never end.
    void relay.cut().then(() => detached(server)).then(() => resume(server, "z"));
    const from: string[] = [];
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=z&at=0`, threadId: "t0", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1, onRetry: ({ lastEventId }) => void from.push(lastEventId) } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expectRejoinedFromOpening(relay, from, (await hits(server)) - before, client, expected);
  }, 120_000);

  test("cut twice, the second time in the rejoined stream: still the same end", async () => {
    const server = await startServer();
    const expected = await uninterrupted(server, "u2", "r1");
    const relay = await relayTo([{ boundary: 2, extra: 3 }, { boundary: 1, extra: 0 }], server);
    void relay.cut(2).then(() => detached(server)).then(() => resume(server, "b"));
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=b`, threadId: "t2", initialState: structuredClone(CLIENT_KEYS), resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.cutsMade).toBe(2);
    expect(await hits(server)).toBe(2);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);
  }, 120_000);

  test("without resume (-no-resume: MiddlewareOptions.NoResume), no ids: the same cut breaks the response off, and a rejoin reaches the handler again (the negative control)", async () => {
    const server = await startServer(["-no-resume"]);
    const relay = await relayTo([{ boundary: 2, extra: 0 }], server);
    void relay.cut().then(() => resume(server, "c"));
    // Read with the plain fetch: @ag-ui/client 1.0.0's HttpAgent rethrows a failed body from its
    // reader's cancel() as an unhandled rejection.
    await expect(readAll(`${relay.url}/agent?pause=c`, input("t3", "r1", CLIENT_KEYS))).rejects.toThrow();
    expect(relay.cutsMade).toBe(1);
    const again = await readAll(`${server.url}/agent`, input("t3", "r1", CLIENT_KEYS), { "last-event-id": "x" });
    expect(again).toContain('"type":"RUN_STARTED"');
    expect(again).not.toMatch(/^id: /m);
    expect(await hits(server)).toBe(2);
  }, 120_000);

  test("a reloaded page: connectAgent() lands on the state and messages of the client that never dropped, and the handler ran once", async () => {
    const server = await startServer();
    const expected = await uninterrupted(server, "u4", "r1");
    const relay = await relayTo([{ boundary: 2, extra: 0 }], server);
    void relay.cut().then(() => detached(server)).then(() => resume(server, "d"));
    // The first page's request is cut and does not resume: the page was closed.
    await expect(readAll(`${relay.url}/agent?pause=d`, input("t4", "r1", CLIENT_KEYS), ALICE)).rejects.toThrow();
    // The reloaded page knows only its thread, and its user's credential.
    const reloaded = new ResumableHttpAgent({ url: `${server.url}/agent`, threadId: "t4", initialState: {}, headers: ALICE });
    await reloaded.connectAgent();
    expect(await hits(server)).toBe(2);
    expect(reloaded.state).toEqual(expected.state);
    expect(reloaded.messages).toEqual(expected.messages);
    // A thread with no run: 204, and the handler is not called.
    const none = await fetch(`${server.url}/agent/connect`, { method: "POST", headers: { "content-type": "application/json", ...ALICE }, body: input("nobody", "r1") });
    expect(none.status).toBe(204);
    expect(await none.text()).toBe("");
    expect(await hits(server)).toBe(2);
  }, 120_000);
});

describe("a run whose app failed (Go middleware)", () => {
  test("issue 40: the handler panics after 3 events, its lifecycle repaired (Lifecycle \"repair\"): the sidecar ends the run with RUN_ERROR, the response ends cleanly, and the client never rejoins", async () => {
    const server = await startServer(["-lifecycle", "repair"]);
    const asked: number[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      asked.push(res.status);
      return res;
    };
    const res = await resumableFetch({ fetch: counting, backoffMs: 1 })(`${server.url}/agent?raise=3`, { method: "POST", headers: { "content-type": "application/json" }, body: input("t7", "r1") });
    const { failed, types, text } = await readToFailure(res);
    expect(failed).toBeUndefined();
    expect(types).toEqual(["RUN_STARTED", "STATE_DELTA", "STATE_DELTA", "RUN_ERROR"]);
    expect(text).toMatch(/"code":"INCOMPLETE_STREAM"/);
    expect(asked).toEqual([200]);
    expect(await requests(server)).toBe(1);
    expect(server.child.stderr).toMatch(/^agui-state: \/agent: the handler panicked: the agent failed; the sidecar ended its run/m);
  }, 120_000);

  test("issue 38: the handler panics after 3 events, its lifecycle passed (the default); the client errs at once: the run and one rejoin, answered 410, reach the server, and no more", async () => {
    const server = await startServer();
    const asked: { lastEventId: string | null; status: number }[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      asked.push({ lastEventId: new Headers(init.headers).get("last-event-id"), status: res.status });
      return res;
    };
    // ResumableHttpAgent's fetch, its body read as HttpAgent reads it (HttpAgent itself rethrows a failed
    // body from its reader's cancel() as an unhandled rejection, @ag-ui/client 1.0.0, as
    // test/resume/failed-run.test.ts says). The run ended broken, and the client holds its last event:
    // its one rejoin is refused like an unknown id (§16), and the client errs with the original error,
    // instead of rejoining a dead run until its log expires.
    const res = await resumableFetch({ fetch: counting, backoffMs: 1 })(`${server.url}/agent?raise=3`, { method: "POST", headers: { "content-type": "application/json" }, body: input("t6", "r1") });
    expect(res.status).toBe(200);
    expect(res.headers.get("ag-ui-resumable")).toBe("true");
    const { failed, types } = await readToFailure(res);
    expect(failed).toBeInstanceOf(Error);
    expect(asked.map((a) => a.status)).toEqual([200, 410]);
    expect(asked[1]?.lastEventId).toMatch(/\.3\.[A-Za-z0-9_-]+$/);
    expect(await requests(server)).toBe(2);
    expect(await hits(server)).toBe(1);
    // What the handler wrote before it panicked reached the client, repaired.
    expect(types).toEqual(["RUN_STARTED", "STATE_DELTA", "STATE_DELTA"]);
  }, 120_000);
});

describe("a rejoin cut short (Go middleware under net/http)", () => {
  test("a rejoin whose run is evicted mid-answer breaks off, one whose client leaves ends: one line of the middleware's each, no panic or stack trace, and the server goes on serving", async () => {
    // A cap the paused run and the filler each fit in, and not both: the filler's events evict the paused run.
    const server = await startServer(["-log-bytes", "1600"]);
    await expectBrokenRejoins(
      pausingServer(server.url, server.child),
      { evicted: /^agui-state: \/agent: the rejoin's answer ended early: the run ended evicted$/m, left: /^agui-state: \/agent: the rejoin's answer ended early: the client left$/m },
      /panic|goroutine \d|\.go:\d/,
    );
  }, 120_000);
});

describe("only the requester rejoins (Go middleware)", () => {
  test("other credentials, another thread, a forged or unknown id: 410, one answer, and the handler is not called; the requester gets the rest", async () => {
    const server = await startServer();
    const body = input("t9", "r1");
    const creds = { authorization: "Bearer alice", cookie: "s=1" };
    const res = await fetch(`${server.url}/agent?pause=e`, { method: "POST", headers: { "content-type": "application/json", ...creds }, body });
    await paused(server, "e");
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    // Its opening id block (§16), then two events.
    const text = await readFirstEvents(reader, 2);
    await detached(server);
    expect(text).toMatch(OPENING);
    const ids = [...text.replace(OPENING, "").matchAll(/^id: (.+)$/gm)].map((m) => m[1] as string);
    expect(ids.length).toBeGreaterThanOrEqual(2);
    expect(new Set(ids).size).toBe(ids.length);
    const last = ids[1] as string;

    await expectOnlyRequester({ url: server.url, body, creds, last, calls: () => hits(server), release: () => resume(server, "e"), whole: () => readAll(`${server.url}/agent`, input("t9b", "r1")) });
  }, 120_000);
});

describe("resume across Go servers (Redis)", () => {
  redis.test("two Go servers share a Redis: the relay's rejoin reaches the other one, which serves it from the log without calling its handler", async () => {
    const store = await startRedis();
    // One secret for both: b checks the credential of a run a filed (protocol/README.md §16).
    const secret = { AGUI_STATE_SECRET: "go-resume test secret, 32 bytes or more" };
    const a = await startServer(["-store", store.url], secret);
    const b = await startServer(["-store", store.url], secret);
    const expected = await uninterrupted(a, "u5", "r1");
    const relay = await relayTo([{ boundary: 2, extra: 5 }], a, b);
    void relay.cut().then(() => detached(a)).then(() => resume(a, "f"));
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent?pause=f`, threadId: "t5", initialState: structuredClone(CLIENT_KEYS), headers: ALICE, resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.connections).toBe(2);
    expect(await hits(a)).toBe(2); // the uninterrupted run, and this one
    expect(await hits(b)).toBe(0); // the rejoin went to b, and b's handler never ran
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);

    // A reload on b, of a run a executed.
    const reloaded = new ResumableHttpAgent({ url: `${b.url}/agent`, threadId: "t5", initialState: {}, headers: ALICE });
    await reloaded.connectAgent();
    expect(reloaded.state).toEqual(expected.state);
    expect(reloaded.messages).toEqual(expected.messages);
    expect(await hits(b)).toBe(0);
  }, 120_000);
});
