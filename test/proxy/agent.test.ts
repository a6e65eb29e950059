import { HttpAgent, type Message } from "@ag-ui/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { request, runInput } from "./http-client.js";
import { replay, type Activity } from "./oracle.js";
import { startProxy } from "./proxy-process.js";
import { sloppyGzipRoute, sloppyRoute } from "./sloppy-agent.js";
import { TestUpstream } from "./upstream.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { OPENING, withoutIds } from "../../scripts/harness/sse-ids.js";

/**
 * The real @ag-ui/client HttpAgent, through the real `dist/agui-state proxy`,
 * in front of a sloppy AG-UI agent (test/proxy/sloppy-agent.ts). The expected
 * result is computed independently: `fix` (StreamFixer) run in this process
 * over the exact bytes the upstream sent, from the state the request carried.
 */

let upstream: TestUpstream;
let sent: Buffer[][];

beforeEach(async () => {
  sent = [];
  // "/crlf-agent" ends its lines with CRLF, as sse-starlette does by default.
  upstream = await TestUpstream.start({ "/agent": sloppyRoute(sent), "/crlf-agent": sloppyRoute(sent, "\r\n"), "/gzip-agent": sloppyGzipRoute(sent) });
});
afterEach(() => upstream.close());

/** The client's activity messages, as the mirror keeps them. */
function activitiesOf(messages: readonly Message[]): Map<string, Activity> {
  const out = new Map<string, Activity>();
  for (const m of messages) if (m.role === "activity") out.set(m.id, { activityType: m.activityType, content: m.content as JsonObject });
  return out;
}

describe("HttpAgent through agui-state proxy, in front of a sloppy agent", () => {
  it("ends every run on the state and activities the proxy's mirror computed, with no warning", async () => {
    const proxy = await startProxy(upstream.url);
    const agent = new HttpAgent({ url: `${proxy.url}/agent`, threadId: "t1", initialState: {} });
    for (const runId of ["r1", "r2"]) {
      const before = structuredClone(agent.state) as JsonObject;
      const said = await runCollecting(agent, runId);
      expect(said).toEqual([]);
      // The baseline is what the client sent: its own state, as HttpAgent puts it in RunAgentInput.
      const asked = upstream.seen.at(-1);
      expect(JSON.parse(asked?.body.toString("utf8") ?? "null")).toMatchObject({ runId, state: before });
      const expected = replay(before, sent.at(-1) ?? []);
      expect(agent.state).toEqual(expected.state);
      expect(activitiesOf(agent.messages)).toEqual(expected.activities);
    }
    // By hand, from protocol/README.md §5: a replace that sets is an add, an
    // append creates its array once, and the second run appends to it.
    expect(agent.state).toMatchObject({ steps: [{ title: "fetch", done: false }], toolState: { count: 1 }, todos: ["milk ☕", "milk ☕"] });
    expect(agent.messages.find((m) => m.id === "m-r2")).toMatchObject({ role: "assistant", content: "Planning… 🗺" });
  });

  it("without the proxy, the same agent makes the client warn and drop deltas (the negative control)", async () => {
    const agent = new HttpAgent({ url: `${upstream.url}/agent`, threadId: "t1", initialState: {} });
    const said = await runCollecting(agent, "r1");
    expect(said.some((s) => s.startsWith("warn: Failed to apply state patch"))).toBe(true);
    expect(said.some((s) => s.startsWith("warn: Failed to apply activity patch"))).toBe(true);
    // Every one of the five state deltas was dropped: a fresh thread stays {}.
    expect(agent.state).toEqual({});
  });

  it("makes a stream framed with CRLF, on which the client's run fails, one it reads event by event", async () => {
    const direct = new HttpAgent({ url: `${upstream.url}/crlf-agent`, threadId: "t1", initialState: {} });
    // The client splits events at two LFs only: it reads the whole answer as one event, whose data is not JSON.
    await expect(runCollecting(direct, "r1")).rejects.toThrow(/JSON/);
    const proxy = await startProxy(upstream.url);
    const agent = new HttpAgent({ url: `${proxy.url}/crlf-agent`, threadId: "t1", initialState: {} });
    expect(await runCollecting(agent, "r1")).toEqual([]);
    const expected = replay({}, sent.at(-1) ?? []);
    expect(expected.text).not.toMatch(/\r/);
    expect(agent.state).toEqual(expected.state);
    expect(activitiesOf(agent.messages)).toEqual(expected.activities);
    expect(agent.state).toMatchObject({ steps: [{ title: "fetch", done: false }], todos: ["milk ☕"] });
  });

  it("sends the client exactly the text fix makes of the upstream's bytes, from the request's RunAgentInput.state", async () => {
    const proxy = await startProxy(upstream.url);
    const state: JsonObject = { selectedLayer: "era5", steps: [{ title: "old", done: true }], toolState: { "raster-ops/dataset": "gfs" } };
    const answer = await request(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: runInput(state) });
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("text/event-stream");
    expect(answer.headers["content-length"]).toBeUndefined();
    // Resume's opening block first (protocol/README.md §16), then fix's text with an id on each event.
    expect(answer.body.toString("utf8")).toMatch(OPENING);
    expect(withoutIds(answer.body.toString("utf8"))).toBe(replay(state, sent[0] ?? []).text);
  });

  it("starts the mirror at {} when the request carries no state", async () => {
    const proxy = await startProxy(upstream.url);
    const answer = await request(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput(undefined) });
    expect(withoutIds(answer.body.toString("utf8"))).toBe(replay({}, sent[0] ?? []).text);
  });

  it("fixes a gzip-encoded event stream too, and sends it decoded", async () => {
    const proxy = await startProxy(upstream.url);
    const answer = await request(`${proxy.url}/gzip-agent`, { method: "POST", headers: { "content-type": "application/json", "accept-encoding": "gzip" }, body: runInput({}) });
    expect(answer.headers["content-encoding"]).toBeUndefined();
    expect(withoutIds(answer.body.toString("utf8"))).toBe(replay({}, sent[0] ?? []).text);
  });
});
