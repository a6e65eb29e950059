import { HttpAgent } from "@ag-ui/client";
import { afterAll, afterEach, beforeAll, describe, expect } from "vitest";
import { expectBrokenRejoins } from "../resume/broken-rejoin.js";
import { expectRefusals, rejoiner } from "../resume/refusals.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { startRedis } from "../../scripts/harness/redis.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { ResumableHttpAgent, resumableFetch } from "../../src/web/resume/index.js";
import { runEvents } from "../resume/paced-agent.js";
import { OPENING, readFirstEvents } from "../../scripts/harness/sse-ids.js";
import { cutName, Relay, type Cut } from "../resume/relay.js";
import { expectRejoinedFromOpening } from "../resume/from-opening.js";
import { readToFailure } from "../resume/failing-body.js";
import { handlerCalls, JARS, type Jetty, requestsFor, startJetty, stopJetties } from "./jetty.js";

/**
 * Issue 34 §8 through the Clojure middleware: agui-state.ring/wrap-agui-state in a real Jetty
 * (clients/clojure/test/agui_state/ring_resume_agent.clj), resume on by default, the real
 * ResumableHttpAgent (agui-state-sidecar/resume) through a TCP relay that cuts the connection at an
 * event boundary or inside an event while the run is live. The client must end on exactly the
 * messages and state of a client that was never cut, with no warning, and the handler must have run
 * once: the rejoin is served by the middleware from the sidecar's run log (protocol/README.md §16).
 */
const { test } = toolchain("Clojure + Ring + Jetty (clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", [
  "bash",
  "-c",
  `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`,
]);
const redisToolchain = toolchain("Redis (Debian redis-server)", ["redis-server", "--version"]);
/** A hang guard for the JVM's start, never an assertion. */
const START_MS = 180_000;

/** One JVM of the Ring agent. */
const startJvm = (env: Record<string, string> = {}): Promise<Jetty> => startJetty("agui-state.ring-resume-agent", { startMs: START_MS, env });

afterAll(stopJetties);

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const portOf = (url: string): number => Number(new URL(url).port);
const post = (url: string): Promise<Response> => fetch(url, { method: "POST" });
const input = (threadId: string, state: Record<string, unknown> = {}): string => JSON.stringify({ threadId, runId: "r1", state, messages: [], tools: [], context: [], forwardedProps: {} });

/** A run's whole answer, read with the plain fetch: how a page without the resume module reads it. */
async function readAll(url: string, threadId: string, state: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", ...headers }, body: input(threadId, state) });
  return res.text();
}

/** The credential of the reload tests: a run is reloaded only by the credential it was started with (§16). */
const ALICE = { authorization: "Bearer alice" };

/** What a client that was never cut ends with: the same agent, unpaused, through the same middleware. */
async function uninterrupted(jvm: Jetty, threadId: string, initialState: Record<string, unknown>) {
  const client = new HttpAgent({ url: `${jvm.url}/agent-now`, threadId, initialState });
  expect(await runCollecting(client, "r1")).toEqual([]);
  return { state: client.state, messages: client.messages };
}

/** A run through a relay with these cuts in front of `targets` (in turn); the gate opens at the first cut. */
async function cutRun(jvm: Jetty, targets: Jetty[], cuts: Cut[], threadId: string, initialState: Record<string, unknown>, path = "/agent", from: string[] = []) {
  expect((await post(`${jvm.url}/gate/close`)).status).toBe(200);
  let next = 0;
  const relay = await Relay.start(cuts, () => portOf((targets[next++ % targets.length] as Jetty).url));
  closers.push(() => relay.close());
  void relay.cut().then(() => post(`${jvm.url}/gate/open`));
  const client = new ResumableHttpAgent({ url: `${relay.url}${path}`, threadId, initialState, resume: { backoffMs: 1, onRetry: ({ lastEventId }) => void from.push(lastEventId) } });
  const said = await runCollecting(client, "r1");
  return { client, said, relay };
}

/** A run cut once and rejoined lands on the client that was never cut, with its own keys, and the handler ran once. */
async function landsUncut(jvm: Jetty, threadId: string, initialState: Record<string, unknown>, cut: Cut): Promise<void> {
  const expected = await uninterrupted(jvm, threadId, initialState);
  const before = await handlerCalls(jvm);
  const { client, said, relay } = await cutRun(jvm, [jvm], [cut], threadId, initialState);
  expect(said).toEqual([]);
  expect(relay.cutsMade).toBe(1);
  expect(relay.connections).toBe(2);
  expect((await handlerCalls(jvm)) - before).toBe(1);
  expect(client.state).toEqual(expected.state);
  expect(client.messages).toEqual(expected.messages);
  expect(client.state).toMatchObject(initialState);
}

describe("wrap-agui-state resumes a dropped stream (Jetty, the sidecar's memory store)", () => {
  let a: Jetty;
  beforeAll(async () => {
    a = await startJvm();
  }, START_MS + 5_000);

  // The first before the first event, where only the opening block's id can rejoin (§16).
  const cuts: Cut[] = [
    { boundary: 0, extra: 9 },
    { boundary: 1, extra: 0 },
    { boundary: 2, extra: 0 },
    { boundary: 2, extra: 7 },
    { boundary: 1, extra: 3 },
    { boundary: 3, extra: 0 },
  ];
  for (const cut of cuts) {
    test(`cut ${cutName(cut)}: the same messages and state, the handler ran once`, async () => {
      const threadId = `c${cut.boundary}-${cut.extra}`;
      await landsUncut(a, threadId, { selectedLayer: "era5", ui: { open: true } }, cut);
    });
  }

  test("the opening id block goes out before the handler's first event: cut right after it while the handler holds its first event back, the client rejoins from that id", async () => {
    const initialState = { selectedLayer: "era5", ui: { open: true } };
    const expected = await uninterrupted(a, "late", initialState);
    const before = await handlerCalls(a);
    // /agent-late writes nothing until the cut opens the gate: were the block held for the first
    // event, the relay would never cut and the run never end.
    const from: string[] = [];
    const { client, said, relay } = await cutRun(a, [a], [{ boundary: 0, extra: 0 }], "late", initialState, "/agent-late", from);
    expect(said).toEqual([]);
    expectRejoinedFromOpening(relay, from, (await handlerCalls(a)) - before, client, expected);
  });

  test("cut twice in one run, the second time in the rejoined stream: still the same end, one handler call", async () => {
    const initialState = { selectedLayer: "era5" };
    const expected = await uninterrupted(a, "twice", initialState);
    const before = await handlerCalls(a);
    const { client, said, relay } = await cutRun(a, [a], [{ boundary: 2, extra: 3 }, { boundary: 3, extra: 0 }], "twice", initialState);
    expect(said).toEqual([]);
    expect(relay.cutsMade).toBe(2);
    expect((await handlerCalls(a)) - before).toBe(1);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);
  });

  test("a run whose app raised fails on the client at once: two requests reach the server, the run and one rejoin answered 410 (issue 38 §5)", async () => {
    const before = await requestsFor(a, "/agent-raise");
    const statuses: number[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      statuses.push(res.status);
      return res;
    };
    // ResumableHttpAgent's fetch, its body read as HttpAgent reads it (HttpAgent itself rethrows a failed
    // body from its reader's cancel() as an unhandled rejection, @ag-ui/client 1.0.0, as
    // test/resume/failed-run.test.ts says). The app wrote 3 events and threw: the run ended broken, and
    // the client holds its last event, so its one rejoin is refused like an unknown id (§16) and the
    // client errs, instead of rejoining a dead run until its log expires.
    const res = await resumableFetch({ fetch: counting, backoffMs: 1 })(`${a.url}/agent-raise`, { method: "POST", headers: { "content-type": "application/json" }, body: input("raised") });
    expect(res.status).toBe(200);
    const { failed, types } = await readToFailure(res);
    expect(failed).toBeInstanceOf(Error);
    expect(statuses).toEqual([200, 410]);
    expect((await requestsFor(a, "/agent-raise")) - before).toBe(2);
    // What the app wrote before it threw reached the client, repaired: its third event, an add under
    // /toolState/raster-ops, which does not exist, is left out (this mount has no :join-keys).
    expect(types).toEqual(["RUN_STARTED", "STATE_DELTA"]);
  });

  test("without the resume module, the same cut breaks the response off (the negative control)", async () => {
    expect((await post(`${a.url}/gate/close`)).status).toBe(200);
    const relay = await Relay.start([{ boundary: 2, extra: 0 }], () => portOf(a.url));
    closers.push(() => relay.close());
    void relay.cut().then(() => post(`${a.url}/gate/open`));
    await expect(readAll(`${relay.url}/agent`, "neg")).rejects.toThrow();
    expect(relay.connections).toBe(1);
  });

  test("a reloaded page: connectAgent() lands on the state and messages of the client that never dropped", async () => {
    const initialState = { selectedLayer: "era5" };
    const expected = await uninterrupted(a, "reload", initialState);
    expect((await post(`${a.url}/gate/close`)).status).toBe(200);
    const before = await handlerCalls(a);
    const relay = await Relay.start([{ boundary: 3, extra: 0 }], () => portOf(a.url));
    closers.push(() => relay.close());
    void relay.cut().then(() => post(`${a.url}/gate/open`));
    // The first page's request is cut and does not resume: the page was closed.
    await expect(readAll(`${relay.url}/agent`, "reload", initialState, ALICE)).rejects.toThrow();
    // The reloaded page knows only its thread, and its credential.
    const reloaded = new ResumableHttpAgent({ url: `${a.url}/agent`, threadId: "reload", initialState: {}, headers: ALICE });
    await reloaded.connectAgent();
    expect((await handlerCalls(a)) - before).toBe(1);
    expect(reloaded.state).toEqual(expected.state);
    expect(reloaded.messages).toEqual(expected.messages);
    // A thread with no run, and the same thread asked by another credential or none (issue 38 §1): 204,
    // nothing applied, and the handler not called.
    for (const [threadId, headers] of [["no-such-thread", ALICE], ["reload", { authorization: "Bearer mallory" }], ["reload", {}]] as const) {
      const none = await fetch(`${a.url}/agent/connect`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: input(threadId) });
      expect(none.status).toBe(204);
      expect(await none.text()).toBe("");
    }
    expect((await handlerCalls(a)) - before).toBe(1);
  });

  test("other credentials, another thread, a forged or unknown id: 410, the same answer, and the handler is not called", async () => {
    expect((await post(`${a.url}/gate/close`)).status).toBe(200);
    const before = await handlerCalls(a);
    const body = input("t9");
    const creds = { authorization: "Bearer alice", cookie: "s=1" };
    const res = await fetch(`${a.url}/agent`, { method: "POST", headers: { "content-type": "application/json", ...creds }, body });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    // The agent writes 4 events, then waits; the repair drops none of the first three. Before them, the
    // answer's opening id block (§16).
    const text = await readFirstEvents(reader, 3);
    expect(text).toMatch(OPENING);
    const ids = [...text.replace(OPENING, "").matchAll(/^id: (.+)$/gm)].map((m) => m[1] as string);
    expect(ids.length).toBeGreaterThanOrEqual(3);
    expect(new Set(ids).size).toBe(ids.length);
    const last = ids[1] as string;
    const ask = rejoiner(`${a.url}/agent`, body);
    await expectRefusals(ask, last, body, creds);
    expect((await handlerCalls(a)) - before).toBe(1);

    // The right credentials get exactly the events after the id, then the rest of the run.
    expect((await post(`${a.url}/gate/open`)).status).toBe(200);
    const ok = await ask(last, creds);
    expect(ok.status).toBe(200);
    expect(ok.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const rest = await ok.text();
    const types = [...rest.matchAll(/"type":"([A-Z_]+)"/g)].map((m) => m[1]);
    expect(types).toEqual(runEvents("t9", "r1").slice(3).map((e) => (e as { type: string }).type));
    expect(rest).not.toContain(`id: ${last}\n`);
    expect((await handlerCalls(a)) - before).toBe(1);
  });
});

describe("wrap-agui-state on a shared redis-server: two JVMs, the rejoin served by the other one", () => {
  let b: Jetty;
  let c: Jetty;
  beforeAll(async () => {
    if (!redisToolchain.available) return;
    const store = await startRedis();
    // Started one after the other: two JVMs starting at once on a small machine take longer than in turn.
    // One resume secret for both (§16): the credential of a run started on one is checked on the other.
    const secret = { RING_AGENT_STORE: store.url, AGUI_STATE_SECRET: "the-two-jvms-share-this-resume-secret" };
    b = await startJvm(secret);
    c = await startJvm(secret);
  }, 2 * START_MS + 10_000);

  // One test: the harness ends the redis-server after the test that started it (scripts/harness/teardown.ts).
  redisToolchain.test("a cut inside an event, its rejoin relayed to the other JVM, and a reload on the other JVM: each lands on the uninterrupted client, the handler ran once, on the first", async () => {
    const initialState = { selectedLayer: "era5" };
    const expected = await uninterrupted(b, "redis1", initialState);
    const [beforeB, beforeC] = [await handlerCalls(b), await handlerCalls(c)];
    const { client, said, relay } = await cutRun(b, [b, c], [{ boundary: 2, extra: 5 }], "redis1", initialState);
    expect(said).toEqual([]);
    expect(relay.connections).toBe(2);
    expect((await handlerCalls(b)) - beforeB).toBe(1);
    expect((await handlerCalls(c)) - beforeC).toBe(0);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);

    // A page reloaded after its first request was cut, on the other JVM.
    const expected2 = await uninterrupted(b, "redis2", initialState);
    expect((await post(`${b.url}/gate/close`)).status).toBe(200);
    const relay2 = await Relay.start([{ boundary: 3, extra: 0 }], () => portOf(b.url));
    closers.push(() => relay2.close());
    void relay2.cut().then(() => post(`${b.url}/gate/open`));
    await expect(readAll(`${relay2.url}/agent`, "redis2", initialState, ALICE)).rejects.toThrow();
    const reloaded = new ResumableHttpAgent({ url: `${c.url}/agent`, threadId: "redis2", initialState: {}, headers: ALICE });
    await reloaded.connectAgent();
    expect(reloaded.state).toEqual(expected2.state);
    expect(reloaded.messages).toEqual(expected2.messages);
    expect((await handlerCalls(b)) - beforeB).toBe(2);
    expect((await handlerCalls(c)) - beforeC).toBe(0);
  });
});

/** Waits until the JVM's log says `line` (a hang guard, never an assertion on time). */
function logged(jvm: Jetty, line: RegExp, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!line.test(jvm.stderr())) return;
      clearTimeout(guard);
      jvm.child.stderr.off("data", check);
      resolve();
    };
    const guard = setTimeout(() => {
      jvm.child.stderr.off("data", check);
      reject(new Error(`timed out waiting for ${what}; stderr:\n${jvm.stderr()}`));
    }, 60_000);
    jvm.child.stderr.on("data", check);
    check();
  });
}

/**
 * expectBrokenRejoins on a JVM whose sidecar caps its run log at 1 KiB. A whole run of the agent (its
 * events with their ids and its prelude, all counted since issue 38) passes that cap and ends
 * unresumable: such a JVM serves only runs cut before the cap, as expectBrokenRejoins's are.
 */
async function brokenRejoins(jvm: Jetty): Promise<void> {
  expect((await post(`${jvm.url}/gate/close`)).status).toBe(200);
  const json = { "content-type": "application/json" };
  await expectBrokenRejoins(
    {
      agent: `${jvm.url}/agent`,
      paused: (threadId) => fetch(`${jvm.url}/agent`, { method: "POST", headers: json, body: input(threadId) }),
      run: (threadId) => fetch(`${jvm.url}/agent-now`, { method: "POST", headers: json, body: input(threadId) }),
      log: jvm.stderr,
      logged: (line, what) => logged(jvm, line, what),
    },
    // The run is silent while its rejoin's client leaves: Jetty says so only when a write fails, and the
    // middleware writes an SSE comment whenever readRejoin comes back empty.
    {
      evicted: /^\d+ agui-state\.ring: \/agent: the rejoin's answer ended early: the run ended evicted$/m,
      left: /^\d+ agui-state\.ring: \/agent: the rejoin's answer ended early: the client left$/m,
    },
    /\tat |Exception in|WARN/,
  );
}

describe("a rejoin cut short (wrap-agui-state in Jetty)", () => {
  test("a rejoin whose run is evicted mid-answer breaks off, one whose client leaves ends: one line of the middleware's each, no stack trace, and Jetty goes on serving", async () => {
    await brokenRejoins(await startJvm({ RING_AGENT_LOG_BYTES: "1K" }));
  }, START_MS + 60_000);
});

describe("wrap-agui-state with an async Ring handler (Jetty's :async? true)", () => {
  let d: Jetty;
  beforeAll(async () => {
    d = await startJvm({ RING_AGENT_ASYNC: "1" });
  }, START_MS + 5_000);

  test("a cut inside an event: the client rejoins and lands on the uninterrupted client, the handler ran once", async () => {
    await landsUncut(d, "async1", { selectedLayer: "era5" }, { boundary: 2, extra: 5 });
  });

  test("a rejoin cut short: broken off when its run is evicted, ended when its client leaves, one line each, no stack trace, and Jetty goes on serving", async () => {
    await brokenRejoins(await startJvm({ RING_AGENT_ASYNC: "1", RING_AGENT_LOG_BYTES: "1K" }));
  }, START_MS + 60_000);
});

describe("a rejoin whose client leaves while the run is silent (wrap-agui-state in Jetty, a 3 s detach grace)", () => {
  test("is noticed, and the detached run it held is cancelled after the grace", async () => {
    const jvm = await startJvm({ RING_AGENT_DETACH_GRACE: "3" });
    expect((await post(`${jvm.url}/gate/close`)).status).toBe(200);
    // The first client reads two events and leaves while the app waits at the gate.
    const first = (await fetch(`${jvm.url}/agent-quiet`, { method: "POST", headers: { "content-type": "application/json" }, body: input("quiet") })).body as ReadableStream<Uint8Array>;
    const reader = first.getReader();
    const text = await readFirstEvents(reader, 2);
    const id = /^id: (.+)$/m.exec(text.replace(OPENING, ""))?.[1] as string;
    // The app's next writes find the client gone: the run is detached. Then the app falls silent.
    expect((await post(`${jvm.url}/gate/open`)).status).toBe(200);
    await logged(jvm, /^\d+ agui-state\.ring: stream s\d+: the client left \(.*\); the run goes on for 3000 ms for a rejoin$/m, "the detach");
    // A rejoin within the grace follows the run, then its client leaves too, during the silence.
    const rejoin = await fetch(`${jvm.url}/agent-quiet`, { method: "POST", headers: { "content-type": "application/json", "last-event-id": id }, body: input("quiet") });
    expect(rejoin.status).toBe(200);
    const following = (rejoin.body as ReadableStream<Uint8Array>).getReader();
    expect((await following.read()).done).toBe(false);
    await following.cancel();
    await logged(jvm, /^\d+ agui-state\.ring: \/agent-quiet: the rejoin's answer ended early: the client left$/m, "the rejoin's departure noticed");
    // Nobody reads the run any more: after the grace the middleware cancels it.
    await logged(jvm, /^\d+ agui-state\.ring: stream s\d+: nobody rejoined within the grace period; the app's response is cancelled$/m, "the run's cancel");
    expect(jvm.stderr()).not.toMatch(/\tat |Exception in|WARN/);
  }, START_MS + 60_000);
});
