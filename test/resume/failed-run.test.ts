import { afterEach, describe, expect, it } from "vitest";
import { resumableFetch } from "../../src/web/resume/index.js";
import { startProxy } from "../proxy/proxy-process.js";
import { TestUpstream } from "../proxy/upstream.js";
import { readToFailure } from "./failing-body.js";

/**
 * A run whose upstream fails mid-stream ends on the client at once (issue 38, "a client that knows
 * when to stop"; protocol/README.md §16). The proxy ends the run's log as cancelled; the client's
 * rejoin from its last event finds nothing after it in a run that ended broken and gets 410, so
 * resumableFetch fails with the original error. Before, every rejoin got 200 and was cut again: 47
 * connections in 12 s, until the log expired. Counted in requests, never in time.
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;

describe("a run whose upstream broke off", () => {
  it("fails on the client after one rejoin, answered 410; the upstream is called once", async () => {
    const upstream = await TestUpstream.start({
      "/agent": (seen) => {
        seen.res.writeHead(200, { "content-type": "text/event-stream" });
        seen.res.write(sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }) + sse({ type: "TEXT_MESSAGE_START", messageId: "m1", role: "assistant" }) + sse({ type: "TEXT_MESSAGE_CONTENT", messageId: "m1", delta: "half" }));
        // The app raised: its server breaks the answer off.
        setTimeout(() => seen.res.destroy(), 50);
      },
    });
    closers.push(() => upstream.close());
    const proxy = await startProxy(upstream.url, ["--log-level", "silent"]);
    const asked: { lastEventId: string | null; status: number }[] = [];
    const counting = async (url: string, init: RequestInit): Promise<Response> => {
      const res = await fetch(url, init);
      asked.push({ lastEventId: new Headers(init.headers).get("last-event-id"), status: res.status });
      return res;
    };
    // The fetch ResumableHttpAgent runs on, its body read as HttpAgent reads it (failing-body.ts says why here).
    const resumable = resumableFetch({ fetch: counting, backoffMs: 1 });
    const res = await resumable(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ threadId: "t1", runId: "r1", state: {}, messages: [] }) });
    expect(res.status).toBe(200);
    const { failed, types } = await readToFailure(res);
    expect(failed).toBeInstanceOf(Error);
    expect(asked.map((a) => a.status)).toEqual([200, 410]);
    expect(asked[1]?.lastEventId).toMatch(/\.3\.[A-Za-z0-9_-]+$/);
    expect(upstream.seen).toHaveLength(1);
    // What the run sent before it broke reached the client, whole.
    expect(types).toEqual(["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]);
  });
});
