import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createLogger } from "../../src/log.js";
import type { RunStart } from "../../src/resume/log.js";
import { openRedisLog, type RedisLog } from "../../src/resume/redis-log.js";
import { follows, PageCut, type Entry } from "../../src/resume/redis-entries.js";
import { redis, startRedis, type RunningRedis } from "../../scripts/harness/redis.js";
import { loggedBlocks } from "./logged-blocks.js";
import { blockOf, readPages } from "./cursor-pages.js";

/**
 * The Redis store keeps each part of a run as one stream entry (redis-log.ts), on a real
 * redis-server: whatever the parts the events came in and whatever characters they hold, a cursor
 * from any event gets exactly the events after it, cut where each ends, in pages of about the bytes
 * it asks for, and an id is found at its number; the same property as the memory store's
 * (memory-log.test.ts). Its keys' TTLs and its connections: redis-ttl.test.ts.
 */
const START: RunStart = { threadId: "t", path: "/agent", credential: "c", status: 200, headers: {}, prelude: [], opening: "run.0.open" };
const CAPS = { retentionMs: 60_000, maxRunBytes: 1e9, maxTotalBytes: 1e10 };
const texts = fc.constantFrom("", "hello", "naïve café", "☕ 🛰 emoji", "日本語のテキスト", "x".repeat(5000), '"quoted" \\ back');

// A redis-server for each test: the harness ends every child a test started after it (teardown.ts).
let server: RunningRedis | undefined;
let log: RedisLog | undefined;
beforeEach(async () => {
  if (!redis.available) return;
  server = await startRedis();
  log = (await openRedisLog(server.url, CAPS, createLogger("silent"))).runLog;
});
afterEach(async () => {
  await log?.close();
});

let runs = 0;
/** A run of its own for each case: the server is shared. */
const newRun = (): string => `run${String(++runs).padStart(9, "0")}`;

describe("RedisLog", () => {
  redis.test("a cursor from any event gets exactly the events after it, whatever the parts and the page size, in any characters", async () => {
    const l = log as RedisLog;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(texts, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 6 }),
        fc.boolean(),
        fc.array(fc.integer({ min: 1, max: 20_000 }), { minLength: 1, maxLength: 8 }),
        async (parts, ended, sizes) => {
          const run = newRun();
          await l.begin(run, START);
          const all: string[] = [];
          for (const part of parts) l.append(run, loggedBlocks(part.map((t) => (all.push(blockOf(run, all.length + 1, t)), all[all.length - 1] as string))));
          if (ended) l.end(run, "finished");
          let i = 0;
          const size = () => sizes[i++ % sizes.length] as number;
          // Nothing to wait for after the last event of a live run: that one is left out.
          for (let after = 0; after < all.length + (ended ? 1 : 0); after++) {
            const cursor = await l.open(run, after);
            const read = await readPages(cursor, size, all.length - after, ended);
            cursor.close();
            expect(read.blocks).toEqual(all.slice(after));
            expect(read.end).toBe(ended ? "finished" : undefined);
            // Whole events, at least one a page, and no more than asked unless it is one event.
            for (const page of read.pages) if (page.events && page.events.ends.length > 1) expect(Buffer.byteLength(page.events.text)).toBeLessThanOrEqual(Math.max(...sizes));
          }
          for (let seq = 1; seq <= all.length; seq++) expect(await l.idAt(run, seq)).toBe(`${run}.${seq}.n${seq - 1}`);
          expect(await l.idAt(run, all.length + 1)).toBeUndefined();
          expect(await l.idAt(run, 0)).toBe(START.opening);
          expect((await l.find(run))?.events).toBe(all.length);
        },
      ),
      { numRuns: 25 },
    );
  });

  redis.test("a run of several MB read in 64 KiB pages: every event once, in order, the bytes exact, each page about 64 KiB", async () => {
    const l = log as RedisLog;
    const run = newRun();
    await l.begin(run, START);
    const all: string[] = [];
    let seed = 38;
    const next = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    const chars = ["a", "é", "日", "🛰", "\\", '"'];
    let bytes = 0;
    while (bytes < 5 * 1024 * 1024) {
      const part: string[] = [];
      for (let k = 1 + next(8); k > 0; k--) {
        const delta = Array.from({ length: 1 + next(3000) }, () => chars[next(chars.length)]).join("");
        const block = blockOf(run, all.length + 1, delta);
        all.push(block);
        part.push(block);
        bytes += Buffer.byteLength(block);
      }
      l.append(run, loggedBlocks(part));
    }
    l.end(run, "finished");
    for (const after of [0, 777]) {
      const cursor = await l.open(run, after);
      const read = await readPages(cursor, () => 64 * 1024, all.length - after, true);
      cursor.close();
      expect(read.end).toBe("finished");
      expect(read.blocks.length).toBe(all.length - after);
      expect(read.blocks.join("") === all.slice(after).join("")).toBe(true);
      const sizes = read.pages.flatMap((p) => (p.events ? [Buffer.byteLength(p.events.text)] : []));
      // Every page but the last is full to within one event (at most 3,000 characters of 4 bytes, and its id and JSON).
      for (const s of sizes.slice(0, -1)) expect(s).toBeGreaterThan(64 * 1024 - 13_000);
      for (const s of sizes) expect(s).toBeLessThanOrEqual(64 * 1024);
    }
  });

  redis.test("a live run: a waiting read gets the next events as they are written, then the end; a closed cursor's waiting read ends cancelled", async () => {
    const l = log as RedisLog;
    const run = newRun();
    await l.begin(run, START);
    const cursor = await l.open(run, 0);
    const first = cursor.read(65536);
    l.append(run, loggedBlocks([blockOf(run, 1, "a"), blockOf(run, 2, "b")]));
    expect((await first).events?.ends.length).toBe(2);
    const second = cursor.read(65536);
    l.end(run, "finished");
    expect(await second).toEqual({ end: "finished" });
    expect(await cursor.read(65536)).toEqual({ end: "finished" });
    cursor.close();

    const other = newRun();
    await l.begin(other, START);
    const waiting = await l.open(other, 0);
    const read = waiting.read(65536);
    waiting.close();
    expect(await read).toEqual({ end: "cancelled" });
    expect(await waiting.read(65536)).toEqual({ end: "cancelled" });
    l.end(other, "finished");
  });

  redis.test("20 cursors following 20 runs as they are written (sharing one blocking read) each get every event once, in order, then the end", async () => {
    const l = log as RedisLog;
    const runs = Array.from({ length: 20 }, () => newRun());
    for (const run of runs) await l.begin(run, START);
    const follows = runs.map(async (run) => {
      const cursor = await l.open(run, 0);
      const read = await readPages(cursor, () => 300, Infinity, true);
      cursor.close();
      return read;
    });
    const all = new Map<string, string[]>(runs.map((run) => [run, []]));
    for (let round = 1; round <= 40; round++) {
      for (const [i, run] of runs.entries()) {
        // Parts of one to three events, written while the cursors read and wait.
        const part = Array.from({ length: 1 + ((round + i) % 3) }, () => {
          const blocks = all.get(run) as string[];
          blocks.push(blockOf(run, blocks.length + 1, `${round}`));
          return blocks[blocks.length - 1] as string;
        });
        l.append(run, loggedBlocks(part));
      }
      await new Promise((r) => setTimeout(r, round % 4));
    }
    for (const run of runs) l.end(run, "finished");
    const reads = await Promise.all(follows);
    for (const [i, run] of runs.entries()) {
      expect(reads[i]?.blocks).toEqual(all.get(run));
      expect(reads[i]?.end).toBe("finished");
    }
  });

  it("entries a shared blocking read brought are a page only for a cursor they go on from (follows), and a page takes whole events from the position on", () => {
    const part = (first: number, n: number): Entry => {
      const blocks = Array.from({ length: n }, (_, k) => blockOf("r", first + k, "x"));
      const e = loggedBlocks(blocks);
      return [`0-${first}`, ["b", e.text, "e", e.ends.join(",")]];
    };
    const entries = [part(11, 2), part(13, 1), ["0-14", ["end", "finished"]] as Entry];
    expect(follows(entries, 10)).toBe(true);
    expect(follows(entries, 11)).toBe(true);
    expect(follows(entries, 13)).toBe(true);
    // A cursor at event 5 that waited behind the read: 6 to 10 are not in these entries.
    expect(follows(entries, 5)).toBe(false);
    const at = { seq: 11, partial: undefined };
    const cut = new PageCut(at, 1e6);
    cut.add(entries);
    expect(cut.page()?.events?.text).toBe(blockOf("r", 12, "x") + blockOf("r", 13, "x"));
    expect(at).toEqual({ seq: 13, partial: undefined });
    const end = new PageCut(at, 1e6);
    end.add(entries);
    expect(end.page()).toEqual({ end: "finished" });
  });

  redis.test("readers counts open cursors in every process sharing the database; a closed one no longer counts", async () => {
    const l = log as RedisLog;
    const elsewhere = (await openRedisLog((server as RunningRedis).url, CAPS, createLogger("silent"))).runLog;
    try {
      const run = newRun();
      await l.begin(run, START);
      l.append(run, loggedBlocks([blockOf(run, 1, "a")]));
      const a = await elsewhere.open(run, 0);
      const b = await elsewhere.open(run, 1);
      // The cursor's first read goes after its ZADD on the same connection: once it answers, Redis counts it.
      await a.read(65536);
      expect(await l.readers(run)).toBe(2);
      a.close();
      a.close();
      await elsewhere.find(run);
      expect(await l.readers(run)).toBe(1);
      b.close();
      await elsewhere.find(run);
      expect(await l.readers(run)).toBe(0);
      l.end(run, "finished");
    } finally {
      await elsewhere.close();
    }
  });

  redis.test("stats counts the bytes of live runs (their prelude included) and the pages readers hold; shed drops nothing", async () => {
    const l = log as RedisLog;
    const run = newRun();
    const before = l.stats();
    await l.begin(run, { ...START, prelude: ["data: {}\n\n"] });
    l.append(run, loggedBlocks([blockOf(run, 1, "é")]));
    const logged = Buffer.byteLength(blockOf(run, 1, "é")) + 10;
    expect(l.stats().bytes - before.bytes).toBe(logged);
    l.hold(1000);
    expect(l.stats().bytes - before.bytes).toBe(logged + 1000);
    l.hold(-1000);
    expect(l.shed(1e9)).toEqual([]);
    l.end(run, "finished");
    expect(l.stats()).toEqual(before);
  });
});
