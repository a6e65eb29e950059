/**
 * B21: the bytes resume holds per retained run, against the bytes of the run's events (its SSE
 * blocks, ids included, as the client read them).
 *
 * Memory store: two proxies, `--store memory` and `--store none`, serve the same runs; each has a
 * probe loaded (bench/heap-probe.cjs) that, on a signal, collects all garbage and reports the live
 * heap plus the memory outside it (Buffers). Held = the memory store's growth over the runs minus
 * the plain proxy's growth over the same runs.
 *
 * Redis store: `INFO memory`'s used_memory after the runs (each one's end in Redis) minus before.
 *
 * The runs are a model's answer streamed a token at a time: 1,000 events, most of them a
 * TEXT_MESSAGE_CONTENT of a word or two, a few typographic quotes among them, written one event per write.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";
import { f, note, type Row } from "./report.js";
import { BODY, proxyWith, redisForBench, redisHoldsEnd, serve, stop, type Proxy } from "./resume.js";

const WORDS = ["The", " model", " streams", " its", " answer", " a", " token", " at", " a", " time", ",", " and", " each", " one", " is", " an", " event", "."];

/** One run's events, as SSE blocks. */
function tokenRun(threadId: string): string[] {
  const m = "m1";
  const blocks = [{ type: "RUN_STARTED", threadId, runId: "r" }, { type: "TEXT_MESSAGE_START", messageId: m, role: "assistant" }];
  for (let i = 0; i < 995; i++) {
    blocks.push({ type: "TEXT_MESSAGE_CONTENT", messageId: m, delta: i % 97 === 0 ? " it’s" : (WORDS[i % WORDS.length] as string) } as never);
    if (i % 400 === 0) blocks.push({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/counter", value: i }] } as never);
  }
  blocks.push({ type: "TEXT_MESSAGE_END", messageId: m } as never, { type: "RUN_FINISHED", threadId, runId: "r" });
  return blocks.map((b) => `data: ${JSON.stringify(b)}\n\n`);
}

/** Runs one request through `url`; resolves with the bytes of the answer. */
function bytesOf(url: string, threadId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/agent`, { method: "POST", agent: false, headers: { "content-type": "application/json" } }, (res) => {
      let n = 0;
      res.on("data", (c: Buffer) => (n += c.length));
      res.on("end", () => resolve(n));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(BODY(threadId));
  });
}

/** The probe's reading: the live heap after a full collection plus memory outside the heap, in bytes. */
async function probe(p: Proxy, file: string): Promise<{ held: number; rss: number }> {
  rmSync(file, { force: true });
  p.child.kill("SIGUSR2");
  while (!existsSync(file)) await new Promise((r) => setTimeout(r, 10));
  // Written in one call; read once it parses.
  for (;;) {
    try {
      const m = JSON.parse(readFileSync(file, "utf8")) as { heapUsed: number; external: number; rss: number };
      return { held: m.heapUsed + m.external, rss: m.rss };
    } catch {
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

export async function retainedBytes(row: (r: Row) => void, quick: boolean): Promise<void> {
  const runs = quick ? 60 : 240;
  const upstream = await serve((_path, body, res) => {
    const { threadId } = JSON.parse(body) as { threadId: string };
    const blocks = tokenRun(threadId);
    res.writeHead(200, { "content-type": "text/event-stream" });
    let i = 0;
    const more = (): void => {
      while (i < blocks.length) if (!res.write(blocks[i++])) return void res.once("drain", more);
      res.end();
    };
    more();
  });
  const dir = mkdtempSync(path.join(tmpdir(), "agui-bench-heap-"));
  const probed = (name: string) => ({ NODE_OPTIONS: `--expose-gc --require ${path.join(ROOT, "bench/heap-probe.cjs")}`, HEAP_PROBE_FILE: path.join(dir, `${name}.json`) });
  const memory = await proxyWith(upstream.url, ["--store", "memory"], probed("memory"));
  const none = await proxyWith(upstream.url, ["--store", "none"], probed("none"));
  const redis = await redisForBench();
  const onRedis = await proxyWith(upstream.url, ["--store", redis.server.url]);
  const files = { memory: path.join(dir, "memory.json"), none: path.join(dir, "none.json") };
  try {
    // Four at a time, each run on its own thread; resolves with the bytes read.
    const drive = async (p: Proxy, tag: string, after?: (threadId: string) => Promise<void>): Promise<number> => {
      let total = 0;
      for (let i = 0; i < runs; i += 4) {
        const ids = [0, 1, 2, 3].map((k) => `${tag}-${i + k}`);
        const got = await Promise.all(ids.map((id) => bytesOf(p.url, id)));
        for (const g of got) total += g;
        if (after) for (const id of ids) await after(id);
      }
      return total;
    };
    // A warm-up run through each, so that what loads on the first run is in the "before".
    await bytesOf(memory.url, "warm");
    await bytesOf(none.url, "warm");
    const before = { memory: await probe(memory, files.memory), none: await probe(none, files.none) };
    const eventBytes = await drive(memory, "m");
    await drive(none, "n");
    const after = { memory: await probe(memory, files.memory), none: await probe(none, files.none) };
    const held = after.memory.held - before.memory.held - (after.none.held - before.none.held);
    const ratio = held / eventBytes;
    const KiB = (n: number) => `${f(n / runs / 1024, 1)} KiB`;
    row({
      id: "B21",
      what: `bytes held per retained run, --store memory (${runs} runs of 1,000 token events; live heap after a full GC plus memory outside it, over --store none's growth for the same runs)`,
      ours: `${KiB(held)} per run`,
      reference: `its events: ${KiB(eventBytes)} per run`,
      ratio: `${f(ratio, 2)}×`,
      target: "≤ 1.5×",
      met: ratio <= 1.5,
    });
    const rssGrowth = after.memory.rss - before.memory.rss - (after.none.rss - before.none.rss);
    note(`B21: the memory store's resident set grew ${KiB(rssGrowth)} per run over the plain proxy's (${f(rssGrowth / eventBytes, 2)}× its events): the heap's own headroom included.`);

    await bytesOf(onRedis.url, "warm");
    await redisHoldsEnd(redis.client, "warm", "/agent");
    const used = async () => Number(/^used_memory:(\d+)$/m.exec(await redis.client.info("memory"))?.[1]);
    const redisBefore = await used();
    const redisEventBytes = await drive(onRedis, "r", (id) => redisHoldsEnd(redis.client, id, "/agent"));
    const redisHeld = (await used()) - redisBefore;
    const redisRatio = redisHeld / redisEventBytes;
    row({
      id: "B21r",
      what: `bytes held per retained run, --store redis://… (${runs} runs of 1,000 token events; INFO memory used_memory after minus before)`,
      ours: `${KiB(redisHeld)} per run`,
      reference: `its events: ${KiB(redisEventBytes)} per run`,
      ratio: `${f(redisRatio, 2)}×`,
      target: "≤ 1.5×",
      met: redisRatio <= 1.5,
    });
  } finally {
    for (const p of [memory, none, onRedis]) await stop(p.child);
    await redis.close();
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
