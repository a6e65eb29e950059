import { HttpAgent } from "@ag-ui/client";
import { afterEach, describe, expect, it } from "vitest";
import { expectRefusals, rejoiner } from "./refusals.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { ResumableHttpAgent } from "../../src/web/resume/index.js";
import { startProxy, type RunningProxy } from "../proxy/proxy-process.js";
import { TestUpstream } from "../proxy/upstream.js";
import { pacedAgent, runEvents } from "./paced-agent.js";
import { cutName, Relay, type Cut } from "./relay.js";
import { expectRejoinedFromOpening } from "./from-opening.js";

/**
 * Resume through the real `dist/agui-state proxy` (protocol/README.md §16), with the real
 * @ag-ui/client HttpAgent and the resume module's fetch. A relay cuts the client's TCP connection
 * at an event boundary or inside an event while the run is live; the client must end on exactly the
 * messages and state of a client that was never cut, with no warning, and the upstream must have
 * been asked once.
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function upstreamWith(pause: number) {
  const agent = pacedAgent(pause);
  const upstream = await TestUpstream.start({ "/agent": agent.handler });
  closers.push(() => upstream.close());
  return { agent, upstream };
}

async function proxyFor(upstream: TestUpstream, args: string[] = []): Promise<RunningProxy> {
  return startProxy(upstream.url, args);
}

const portOf = (url: string): number => Number(new URL(url).port);

/** A RunAgentInput as HttpAgent sends it. */
const input = (threadId: string, state: Record<string, unknown> = {}): string => JSON.stringify({ threadId, runId: "r1", state, messages: [], tools: [], context: [], forwardedProps: {} });

/**
 * A run's whole answer, read with the plain fetch: how a page without the resume module reads it.
 * (HttpAgent itself, when its body fails, rethrows the failure from its reader's cancel() as an
 * unhandled rejection: @ag-ui/client 1.0.0, runHttpRequest.)
 */
async function readAll(url: string, threadId: string, state: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", ...headers }, body: input(threadId, state) });
  return res.text();
}

/** What a client that was never cut ends with. */
async function uninterrupted(threadId: string, initialState: Record<string, unknown>) {
  const { agent, upstream } = await upstreamWith(99);
  agent.go();
  const proxy = await proxyFor(upstream);
  const client = new HttpAgent({ url: `${proxy.url}/agent`, threadId, initialState });
  expect(await runCollecting(client, "r1")).toEqual([]);
  return { state: client.state, messages: client.messages };
}

describe("a dropped stream continues where it stopped (memory store)", () => {
  // Cuts at event boundaries and inside events, all before the run's pause (4 events in); the first
  // two before the first event, where only the opening block's id can rejoin.
  const cuts: Cut[] = [
    { boundary: 0, extra: 0 },
    { boundary: 0, extra: 9 },
    { boundary: 1, extra: 0 },
    { boundary: 2, extra: 0 },
    { boundary: 2, extra: 7 },
    { boundary: 3, extra: 1 },
    { boundary: 3, extra: 0 },
  ];
  for (const cut of cuts) {
    it(`cut ${cutName(cut)}: the same messages and state, one upstream request`, async () => {
      const initialState = { selectedLayer: "era5", ui: { open: true } };
      const expected = await uninterrupted("t1", initialState);

      const { agent, upstream } = await upstreamWith(4);
      const proxy = await proxyFor(upstream);
      const relay = await Relay.start([cut], () => portOf(proxy.url));
      closers.push(() => relay.close());
      const client = new ResumableHttpAgent({ url: `${relay.url}/agent`, threadId: "t1", initialState, resume: { backoffMs: 1 } });
      // The rest of the run is written only once the cut is made: the rejoin then gets the events it
      // missed from the log, and the rest live, as the agent writes them.
      void relay.cut().then(() => agent.go());
      const said = await runCollecting(client, "r1");
      expect(said).toEqual([]);
      expect(relay.cutsMade).toBe(1);
      expect(relay.connections).toBe(2);
      expect(upstream.seen).toHaveLength(1);
      expect(client.state).toEqual(expected.state);
      expect(client.messages).toEqual(expected.messages);
      expect(client.state).toMatchObject(initialState);
    });
  }

  it("cut after the opening block while the upstream has sent no event yet: the client rejoins from that id (number 0) and gets every event", async () => {
    const initialState = { selectedLayer: "era5", ui: { open: true } };
    const expected = await uninterrupted("t0", initialState);
    // The upstream sends its head and nothing more until the cut is made: the opening block must go
    // out before its first event, or the relay never cuts and the run never ends.
    const { agent, upstream } = await upstreamWith(0);
    const proxy = await proxyFor(upstream);
    const relay = await Relay.start([{ boundary: 0, extra: 0 }], () => portOf(proxy.url));
    closers.push(() => relay.close());
    void relay.cut().then(() => agent.go());
    const from: string[] = [];
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent`, threadId: "t0", initialState, resume: { backoffMs: 1, onRetry: ({ lastEventId }) => void from.push(lastEventId) } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expectRejoinedFromOpening(relay, from, upstream.seen.length, client, expected);
  });

  it("cut twice in one run, the second time in the rejoined stream: still the same end", async () => {
    const initialState = { selectedLayer: "era5" };
    const expected = await uninterrupted("t2", initialState);
    const { agent, upstream } = await upstreamWith(4);
    agent.go();
    const proxy = await proxyFor(upstream);
    const relay = await Relay.start([{ boundary: 2, extra: 3 }, { boundary: 3, extra: 0 }], () => portOf(proxy.url));
    closers.push(() => relay.close());
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent`, threadId: "t2", initialState, resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.cutsMade).toBe(2);
    expect(upstream.seen).toHaveLength(1);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);
  });

  it("without the resume module, the same cut breaks the response off (the negative control)", async () => {
    const { agent, upstream } = await upstreamWith(4);
    const proxy = await proxyFor(upstream);
    const relay = await Relay.start([{ boundary: 2, extra: 0 }], () => portOf(proxy.url));
    closers.push(() => relay.close());
    void agent.paused().then(() => agent.go());
    await expect(readAll(`${relay.url}/agent`, "t1")).rejects.toThrow();
    expect(relay.connections).toBe(1);
  });

  it("a reloaded page: connectAgent() lands on the state and messages of the client that never dropped", async () => {
    const initialState = { selectedLayer: "era5" };
    const expected = await uninterrupted("t3", initialState);
    const { agent, upstream } = await upstreamWith(4);
    const proxy = await proxyFor(upstream);
    const relay = await Relay.start([{ boundary: 3, extra: 0 }], () => portOf(proxy.url));
    closers.push(() => relay.close());
    void agent.paused().then(() => agent.go());
    // The first page's request is cut and does not resume: the page was closed. Its user is signed in:
    // a reload needs the credential the run started with (§16; an anonymous run is never reloaded).
    const signedIn = { authorization: "Bearer alice" };
    await expect(readAll(`${relay.url}/agent`, "t3", initialState, signedIn)).rejects.toThrow();
    // The reloaded page knows only its thread, and its user.
    const reloaded = new ResumableHttpAgent({ url: `${proxy.url}/agent`, threadId: "t3", initialState: {}, headers: signedIn });
    await reloaded.connectAgent();
    expect(upstream.seen).toHaveLength(1);
    expect(reloaded.state).toEqual(expected.state);
    expect(reloaded.messages).toEqual(expected.messages);
  });
});

describe("only the requester rejoins", () => {
  async function liveRun(headers: Record<string, string>) {
    const { agent, upstream } = await upstreamWith(4);
    const proxy = await proxyFor(upstream);
    const body = input("t9");
    const res = await fetch(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    // The agent writes 4 events, then waits; the proxy drops one of them (an unescaped key it cannot place).
    // The answer starts with its opening block, an id alone (§16): four blocks, then.
    let text = "";
    while ((text.match(/\n\n/g) ?? []).length < 4) {
      const chunk = await reader.read();
      if (chunk.done) throw new Error(`the answer ended early: ${text}`);
      text += new TextDecoder().decode(chunk.value);
    }
    await reader.cancel();
    const [opening, ...ids] = [...text.matchAll(/^id: (.+)$/gm)].map((m) => m[1] as string);
    expect(text.startsWith(`id: ${opening}\n\n`)).toBe(true);
    return { agent, upstream, proxy, body, ids, opening: opening as string };
  }

  it("each event has an id; none can be made from another", async () => {
    const { ids, opening, agent } = await liveRun({});
    agent.go();
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(3);
    const [run, , nonce] = (ids[0] as string).split(".");
    for (const id of ids) expect(id.split(".")[0]).toBe(run);
    // The opening block's id is the run's number 0, with a nonce of its own.
    expect(opening.split(".").slice(0, 2)).toEqual([run, "0"]);
    expect(opening.split(".")[2]).not.toBe(nonce);
    // The next id is not the last with its number raised: the rest of it is random.
    expect((ids[1] as string).split(".")[2]).not.toBe(nonce);
  });

  it("other credentials, another thread, a forged or unknown id: 410, the same answer, and the upstream is not called", async () => {
    const { proxy, upstream, body, ids, agent } = await liveRun({ authorization: "Bearer alice", cookie: "s=1" });
    const last = ids[1] as string;
    const ask = rejoiner(`${proxy.url}/agent`, body);
    await expectRefusals(ask, last, body, { authorization: "Bearer alice", cookie: "s=1" });
    expect(upstream.seen).toHaveLength(1);

    // The right credentials get exactly the events after the id, then the rest of the run.
    agent.go();
    const ok = await ask(last, { authorization: "Bearer alice", cookie: "s=1" });
    expect(ok.status).toBe(200);
    const text = await ok.text();
    const types = [...text.matchAll(/"type":"([A-Z_]+)"/g)].map((m) => m[1]);
    // After the second event sent (RUN_STARTED, then the mended STATE_DELTA): the agent's fourth on.
    expect(types).toEqual(runEvents("t9", "r1").slice(3).map((e) => (e as { type: string }).type));
    expect(upstream.seen).toHaveLength(1);
  });
});
