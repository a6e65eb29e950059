import type http from "node:http";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "../proxy/proxy-process.js";
import { TestUpstream } from "../proxy/upstream.js";

/**
 * The run log's caps hold in the real proxy's memory (issue 38, protocol/README.md §16), read as the
 * proxy's resident set (/proc/PID/status), never as time:
 * - every byte kept for a run counts against --log-bytes, the request state a reload replays too:
 *   300 runs whose requests carry 500 KB of state grow the proxy no more than `--store none` grows on
 *   the same load, plus the cap and a few MiB (before: from 78 to 320 MB);
 * - a rejoin's reader that takes its answer slowly holds the proxy to a page: it does not grow while
 *   a 50 MB run is read a KiB at a time.
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const MiB = 1024 * 1024;
const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;
const RUN = [sse({ type: "RUN_STARTED", threadId: "t", runId: "r" }), sse({ type: "RUN_FINISHED", threadId: "t", runId: "r" })].join("");

async function upstreamOf(answer: (res: http.ServerResponse) => void): Promise<TestUpstream> {
  const upstream = await TestUpstream.start({ "/agent": (seen) => answer(seen.res) });
  closers.push(() => upstream.close());
  return upstream;
}

/** Posts `n` runs, one after another, each with a RunAgentInput carrying `stateBytes` of state in its own thread; reads each answer whole. */
async function runs(proxy: RunningProxy, n: number, stateBytes: number): Promise<void> {
  const state = { blob: "x".repeat(stateBytes) };
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer a" }, body: JSON.stringify({ threadId: `t${i}`, runId: "r", state, messages: [] }) });
    await res.text();
  }
}

/** The proxy's resident set growth over `load`, in MiB, from a warmed-up start (a first batch of the same load). */
async function growth(args: string[], load: (p: RunningProxy) => Promise<void>, warm: (p: RunningProxy) => Promise<void>): Promise<number> {
  const upstream = await upstreamOf((res) => res.writeHead(200, { "content-type": "text/event-stream" }).end(RUN));
  const proxy = await startProxy(upstream.url, ["--log-level", "silent", ...args]);
  await warm(proxy);
  const before = proxy.child.rss();
  await load(proxy);
  return (proxy.child.rss() - before) / MiB;
}

describe("the run log's caps, in the proxy's resident set", () => {
  it("300 runs of 500 KB requests under --log-bytes 1M grow it no more than --store none does, plus the cap and 8 MiB", async () => {
    const load = (p: RunningProxy) => runs(p, 300, 500_000);
    const warm = (p: RunningProxy) => runs(p, 20, 500_000);
    const none = await growth(["--store", "none"], load, warm);
    const capped = await growth(["--log-bytes", "1M"], load, warm);
    expect(capped, `--store none grew ${none.toFixed(1)} MiB`).toBeLessThanOrEqual(Math.max(0, none) + 1 + 8);
  });

  it("a rejoin read a KiB at a time from a 50 MB run holds the proxy flat", async () => {
    const event = sse({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "y".repeat(10_000) });
    const upstream = await upstreamOf((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse({ type: "RUN_STARTED", threadId: "t", runId: "r" }) + sse({ type: "TEXT_MESSAGE_START", messageId: "m", role: "assistant" }));
      for (let i = 0; i < 5000; i++) res.write(event);
      res.end(sse({ type: "TEXT_MESSAGE_END", messageId: "m" }) + sse({ type: "RUN_FINISHED", threadId: "t", runId: "r" }));
    });
    const proxy = await startProxy(upstream.url, ["--log-level", "silent", "--run-log-bytes", "64M"]);
    const body = JSON.stringify({ threadId: "t", runId: "r", state: {}, messages: [] });
    const first = await fetch(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const text = await first.text();
    expect(text.length).toBeGreaterThan(50 * 1000 * 1000);
    const opening = /^id: (.*)$/m.exec(text)?.[1] as string;
    const before = proxy.child.rss();
    // A client that reads 1 KiB, then waits, over and over: its socket's window stays full.
    const { port } = new URL(proxy.url);
    const socket = net.connect(Number(port), "127.0.0.1");
    closers.push(() => Promise.resolve(void socket.destroy()));
    socket.pause();
    socket.write(`POST /agent HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nlast-event-id: ${opening}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    let read = 0;
    let most = before;
    for (let i = 0; i < 300; i++) {
      await new Promise((r) => setTimeout(r, 10));
      const chunk = socket.read(1024) as Buffer | null;
      read += chunk?.length ?? 0;
      if (i % 20 === 0) most = Math.max(most, proxy.child.rss());
    }
    expect(read).toBeGreaterThan(100 * 1024);
    expect(read).toBeLessThan(1024 * 1024);
    expect((most - before) / MiB).toBeLessThan(16);
  });
});
