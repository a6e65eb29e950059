import { HttpAgent } from "@ag-ui/client";
import { afterEach, describe, expect } from "vitest";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { redis, startRedis } from "../../scripts/harness/redis.js";
import { ResumableHttpAgent } from "../../src/web/resume/index.js";
import { startProxy } from "../proxy/proxy-process.js";
import { TestUpstream } from "../proxy/upstream.js";
import { pacedAgent } from "./paced-agent.js";
import { Relay } from "./relay.js";

/**
 * Resume across processes, on a real redis-server (`--store redis://…`, protocol/README.md §16): a
 * rejoin served by another proxy than the one running the run, and by a proxy started after the one
 * that ran it was killed.
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const portOf = (url: string): number => Number(new URL(url).port);

describe("resume on Redis", () => {
  redis.test("two proxies share a Redis: the relay's rejoin reaches the other one, and the client ends as if never cut", async () => {
    const store = await startRedis();
    const initialState = { selectedLayer: "era5" };

    const plain = pacedAgent(99);
    plain.go();
    const plainUp = await TestUpstream.start({ "/agent": plain.handler });
    closers.push(() => plainUp.close());
    const direct = await startProxy(plainUp.url, ["--store", store.url]);
    const expected = new HttpAgent({ url: `${direct.url}/agent`, threadId: "r1", initialState });
    expect(await runCollecting(expected, "r1")).toEqual([]);

    const agent = pacedAgent(4);
    const upstream = await TestUpstream.start({ "/agent": agent.handler });
    closers.push(() => upstream.close());
    const a = await startProxy(upstream.url, ["--store", store.url]);
    const b = await startProxy(upstream.url, ["--store", store.url]);
    const targets = [portOf(a.url), portOf(b.url)];
    let next = 0;
    const relay = await Relay.start([{ boundary: 2, extra: 5 }], () => targets[next++ % 2] as number);
    closers.push(() => relay.close());
    void relay.cut().then(() => agent.go());
    const client = new ResumableHttpAgent({ url: `${relay.url}/agent`, threadId: "r1", initialState, resume: { backoffMs: 1 } });
    expect(await runCollecting(client, "r1")).toEqual([]);
    expect(relay.connections).toBe(2);
    expect(upstream.seen).toHaveLength(1);
    expect(client.state).toEqual(expected.state);
    expect(client.messages).toEqual(expected.messages);
    // The rejoin was served by b, from Redis. Its log line is written as the answer ends and may reach
    // stderr after the client saw the end.
    await b.child.until(() => b.child.stderr.includes('"msg":"rejoin served"'), "b's rejoin served line in its log");
    expect(a.child.stderr).not.toContain('"msg":"rejoin served"');
  });

  redis.test("a proxy killed mid-run: one started after it serves the rejoin from what the first wrote, then breaks the answer off", async () => {
    const store = await startRedis();
    const agent = pacedAgent(4);
    const upstream = await TestUpstream.start({ "/agent": agent.handler });
    closers.push(() => upstream.close());
    const first = await startProxy(upstream.url, ["--store", store.url]);
    const body = JSON.stringify({ threadId: "k1", runId: "r1", state: {}, messages: [], tools: [], context: [], forwardedProps: {} });
    const res = await fetch(`${first.url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    while ((text.match(/\n\n/g) ?? []).length < 3) {
      const chunk = await reader.read();
      if (chunk.done) throw new Error("ended early");
      text += new TextDecoder().decode(chunk.value);
    }
    const ids = [...text.matchAll(/^id: (.+)$/gm)].map((m) => m[1] as string);
    first.child.kill("SIGKILL");
    await first.child.waitForExit();
    await reader.cancel().catch(() => undefined);

    const second = await startProxy(upstream.url, ["--store", store.url]);
    const again = await fetch(`${second.url}/agent`, { method: "POST", headers: { "content-type": "application/json", "last-event-id": ids[0] as string }, body });
    expect(again.status, second.child.stderr).toBe(200);
    // Read to the end, keeping what came before the answer broke off.
    let replay = "";
    let broken = false;
    const rejoined = (again.body as ReadableStream<Uint8Array>).getReader();
    for (;;) {
      try {
        const chunk = await rejoined.read();
        if (chunk.done) break;
        replay += new TextDecoder().decode(chunk.value);
      } catch {
        broken = true;
        break;
      }
    }
    expect(broken).toBe(true);
    // The two events after the first, as the first proxy wrote them, then a broken answer: the run's writer is gone.
    expect(replay).toContain(`id: ${ids[1] as string}\n`);
    expect(replay).toContain(`id: ${ids[2] as string}\n`);
    expect(replay).not.toContain(`id: ${ids[0] as string}\n`);
    // The log line is written as the answer breaks; it may reach stderr after the client saw the break.
    await second.child.until(() => second.child.stderr.includes('"reason":"cancelled"'), "the rejoin's end, cancelled, in the log");
    expect(upstream.seen).toHaveLength(1);
  });
});
