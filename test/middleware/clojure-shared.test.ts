import { readFileSync, rmSync } from "node:fs";
import { HttpAgent } from "@ag-ui/client";
import { afterAll, afterEach, beforeAll, describe, expect } from "vitest";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { ResumableHttpAgent } from "../../src/web/resume/index.js";
import { Relay, type Cut } from "../resume/relay.js";
import { handlerCalls, JARS, type Jetty, requestsFor, startJetty, stopJetties } from "./jetty.js";
import { exited, killSidecars, settledSidecars, sidecarsServing, socketAddress } from "./shared-sidecar.js";

/**
 * Issue 42 through the Clojure middleware: Jetty processes of
 * clients/clojure/test/agui_state/ring_resume_agent.clj on one shared sidecar (`serve --listen
 * unix:PATH`, protocol/README.md §2, "One sidecar per host"), the memory store, resume on. One process
 * names it in AGUI_STATE_SIDECAR, the other in the component's :sidecar option, both in start mode,
 * started at once: the first to find nobody starts it. A third runs a sidecar of its own, as before.
 * The real ResumableHttpAgent is cut mid-run through a relay and its rejoin sent to the other process;
 * the shared sidecar is killed under six streams. Three JVMs for the whole file: each takes seconds.
 */
const { test } = toolchain("Clojure + Ring + Jetty (clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", [
  "bash",
  "-c",
  `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`,
]);
/** A hang guard for the JVMs' start, never an assertion. */
const START_MS = 240_000;

/** One JVM of the Ring agent. */
const startJvm = (env: Record<string, string>): Promise<Jetty> => startJetty("agui-state.ring-resume-agent", { startMs: START_MS, env });

const { address, dir } = socketAddress();
let a: Jetty;
let b: Jetty;
let own: Jetty;

beforeAll(async () => {
  // Both in start mode at once: each finds nobody and starts a sidecar; one serves, the other's exits 3.
  [a, b] = await Promise.all([
    startJvm({ AGUI_STATE_SIDECAR: address, AGUI_STATE_SIDECAR_START: "1" }),
    startJvm({ RING_AGENT_SIDECAR: address, RING_AGENT_SIDECAR_START: "1" }),
  ]);
  own = await startJvm({});
}, START_MS + 10_000);

afterAll(() => {
  stopJetties();
  // Detached, the shared sidecar outlives the JVMs (it would exit a minute after its last connection).
  killSidecars(address);
  rmSync(dir, { recursive: true, force: true });
});

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const portOf = (url: string): number => Number(new URL(url).port);
const post = (url: string): Promise<Response> => fetch(url, { method: "POST" });
const INITIAL = { selectedLayer: "era5", ui: { open: true } };

/** What a client that was never cut ends with: the same agent, unpaused, through the same middleware. */
async function uninterrupted(jvm: Jetty, threadId: string) {
  const client = new HttpAgent({ url: `${jvm.url}/agent-now`, threadId, initialState: structuredClone(INITIAL) });
  expect(await runCollecting(client, "r1")).toEqual([]);
  return { state: client.state, messages: client.messages };
}

/** A run on `first`, cut once through a relay, whose rejoin goes to `second`; the gate opens at the cut. */
async function cutAcross(first: Jetty, second: Jetty, cut: Cut, threadId: string) {
  expect((await post(`${first.url}/gate/close`)).status).toBe(200);
  const targets = [first, second];
  let next = 0;
  const relay = await Relay.start([cut], () => portOf((targets[Math.min(next++, 1)] as Jetty).url));
  closers.push(() => relay.close());
  void relay.cut().then(() => post(`${first.url}/gate/open`));
  const client = new ResumableHttpAgent({ url: `${relay.url}/agent`, threadId, initialState: structuredClone(INITIAL), resume: { backoffMs: 1 } });
  let failed: unknown;
  const said = await runCollecting(client, "r1").catch((e: unknown) => ((failed = e), []));
  return { client, said, relay, failed };
}

/** The run cut on `first` and rejoined on `second` ends exactly as the uncut one; the handler ran once, on `first`. */
async function landsAcross(first: Jetty, second: Jetty, cut: Cut, threadId: string): Promise<void> {
  const expected = await uninterrupted(first, threadId);
  const [before1, before2] = [await handlerCalls(first), await handlerCalls(second)];
  const rejoins = await requestsFor(second, "/agent");
  const { client, said, relay, failed } = await cutAcross(first, second, cut, threadId);
  expect(failed).toBeUndefined();
  expect(said).toEqual([]);
  expect(relay.cutsMade).toBe(1);
  expect(relay.connections).toBe(2);
  expect((await requestsFor(second, "/agent")) - rejoins).toBe(1);
  expect((await handlerCalls(first)) - before1).toBe(1);
  expect((await handlerCalls(second)) - before2).toBe(0);
  expect(client.state).toEqual(expected.state);
  expect(client.messages).toEqual(expected.messages);
}

const RESTART = new RegExp(
  String.raw`agui-state\.ring: the sidecar \(${address}\) was lost during fixStream on stream s\d+ \(the connection closed\); connected again \(${address}\), stream s\d+ resumes with its mirror rebuilt from the \d+ bytes answered for\n`,
  "g",
);

describe("two Jetty processes on one shared sidecar, the memory store: a rejoin on the other process", () => {
  test("the processes started at once in start mode run one sidecar, detached from both", async () => {
    const pids = await settledSidecars(address);
    expect(pids).toHaveLength(1);
    // Detached: a session of its own (/proc/PID/stat's sixth field is its session id, the pid of
    // its leader), not a JVM's, so that a signal to a JVM's process group does not reach it.
    const pid = pids[0] as number;
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    expect(Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3])).toBe(pid);
  });

  test("cut inside an event on the first (AGUI_STATE_SIDECAR), rejoined on the second (:sidecar): the same messages and state as uncut", async () => {
    await landsAcross(a, b, { boundary: 2, extra: 5 }, "across1");
  });

  test("cut at an event boundary on the second, rejoined on the first: the same", async () => {
    await landsAcross(b, a, { boundary: 3, extra: 0 }, "across2");
  });

  test("the negative control: a process with a sidecar of its own, its run's rejoin sent to another, fails the client's run", async () => {
    const expected = await uninterrupted(own, "solo");
    const rejoins = await requestsFor(a, "/agent");
    const { client, said, failed } = await cutAcross(own, a, { boundary: 2, extra: 5 }, "solo");
    // The rejoin reached the other process, which knows no such run (410): the client errs.
    expect((await requestsFor(a, "/agent")) - rejoins).toBe(1);
    expect(failed !== undefined || said.length > 0).toBe(true);
    expect(client.messages).not.toEqual(expected.messages);
  });
});

describe("the shared sidecar killed under six streams over the two processes", () => {
  test("every stream ends exactly as uncut, each process connects again (one sidecar started again), and later runs are repaired and rejoin across again", async () => {
    const per = 3;
    const threads = [a, b].flatMap((jvm, j) => Array.from({ length: per }, (_, i) => ({ jvm, threadId: `load${j}-${i}` })));
    const expected = await Promise.all(threads.map(({ jvm, threadId }) => uninterrupted(jvm, threadId)));
    for (const jvm of [a, b]) expect((await post(`${jvm.url}/gate/close`)).status).toBe(200);
    const agents = threads.map(({ jvm, threadId }) => new HttpAgent({ url: `${jvm.url}/agent`, threadId, initialState: structuredClone(INITIAL) }));
    const running = agents.map((agent) => runCollecting(agent, "r1"));
    // Each stream has written its first events through the sidecar, and waits at the gate.
    for (const jvm of [a, b]) expect((await fetch(`${jvm.url}/paused?n=${per}`)).status).toBe(200);
    const [killed] = sidecarsServing(address);
    expect(killed).toBeGreaterThan(0);
    process.kill(killed as number, "SIGKILL");
    // Dead, its socket closed, before the streams write again: what they meet is a sidecar that died.
    await exited(killed as number);
    for (const jvm of [a, b]) expect((await post(`${jvm.url}/gate/open`)).status).toBe(200);
    const said = await Promise.all(running);
    for (const [i, agent] of agents.entries()) {
      expect(said[i]).toEqual([]);
      expect(agent.state).toEqual(expected[i]?.state);
      expect(agent.messages).toEqual(expected[i]?.messages);
    }
    // Each stream was opened again on the new connection and fed its replay, and said so once.
    for (const jvm of [a, b]) {
      expect(jvm.stderr().match(RESTART) ?? []).toHaveLength(per);
      expect(jvm.stderr()).not.toMatch(/unrepaired|classifyRequest failed|openStream failed/);
    }
    const pids = await settledSidecars(address);
    expect(pids).toHaveLength(1);
    expect(pids).not.toContain(killed);

    // Later runs: repaired on both (the agent's events are the same on every thread but for its id,
    // and unrepaired they make the client warn), and a rejoin across the processes finds its run again.
    for (const jvm of [a, b]) {
      const after = await uninterrupted(jvm, "after");
      expect(after).toEqual(expected[0]);
    }
    await landsAcross(a, b, { boundary: 2, extra: 0 }, "after-kill");
  });
});
