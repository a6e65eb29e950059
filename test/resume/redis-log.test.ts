import fc from "fast-check";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { createLogger } from "../../src/log.js";
import type { RunEnd } from "../../src/resume/log.js";
import { blocksOf, loggedBlocks } from "./logged-blocks.js";
import { openRedisLog, type RedisLog } from "../../src/resume/redis-log.js";
import { redis, startRedis } from "../../scripts/harness/redis.js";

/**
 * The Redis store keeps each part of a run as one stream entry (redis-log.ts), on a real
 * redis-server: whatever the parts the events came in and whatever characters they hold, a rejoin
 * from any event gets exactly the events after it, cut where each ends, and an id is found at its
 * number; the same property as the memory store's (memory-log.test.ts).
 */
const START = { threadId: "t", path: "/agent", credential: "c", status: 200, headers: {}, prelude: [], opening: "run.0.open" };
const texts = fc.constantFrom("", "hello", "naïve café", "☕ 🛰 emoji", "日本語のテキスト", "x".repeat(5000), '"quoted" \\ back');

let log: RedisLog | undefined;
beforeAll(async () => {
  if (!redis.available) return;
  const store = await startRedis();
  log = (await openRedisLog(store.url, { retentionMs: 60_000, maxRunBytes: 1e9, maxTotalBytes: 1e10 }, createLogger("silent"))).runLog;
});
afterAll(async () => {
  await log?.close();
});

/** What a follower from `after` gets, once it has `count` events (and, when the run ended, its end). */
function follow(l: RedisLog, run: string, after: number, count: number, ended: boolean): Promise<{ got: string[]; ends: RunEnd[] }> {
  return new Promise((resolve, reject) => {
    const got: string[] = [];
    const ends: RunEnd[] = [];
    let stop: (() => void) | undefined;
    let done = false;
    const check = () => {
      if (done || got.length < count || (ended && ends.length === 0)) return;
      done = true;
      stop?.();
      resolve({ got, ends });
    };
    l.follow(run, after, { events: (e) => (got.push(...blocksOf(e)), check()), end: (r) => (ends.push(r), check()) }).then((s) => {
      stop = s;
      if (done) s();
    }, reject);
  });
}

let runs = 0;

describe("RedisLog", () => {
  redis.test("a rejoin from any event gets exactly the events after it, whatever the parts, in any characters", async () => {
    const l = log as RedisLog;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(texts, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 6 }), fc.boolean(), async (parts, ended) => {
        // A run of its own each time: the server is shared.
        const run = `run${String(++runs).padStart(9, "0")}`.slice(0, 12);
        await l.begin(run, START);
        const all: string[] = [];
        for (const part of parts) {
          const blocks = part.map((t) => {
            const block = `id: ${run}.${all.length + 1}.n${all.length}\ndata: ${JSON.stringify({ type: "TEXT_MESSAGE_CONTENT", delta: t })}\n\n`;
            all.push(block);
            return block;
          });
          l.append(run, loggedBlocks(blocks));
        }
        if (ended) l.end(run, "finished");
        // Nothing to wait for after the last event of a live run: that one is left out.
        for (let after = 0; after < all.length + (ended ? 1 : 0); after++) {
          const { got, ends } = await follow(l, run, after, all.length - after, ended);
          expect(got).toEqual(all.slice(after));
          expect(ends).toEqual(ended ? ["finished"] : []);
        }
        for (let seq = 1; seq <= all.length; seq++) expect(await l.idAt(run, seq)).toBe(`${run}.${seq}.n${seq - 1}`);
        expect(await l.idAt(run, all.length + 1)).toBeUndefined();
        expect(await l.idAt(run, 0)).toBe(START.opening);
        expect((await l.find(run))?.events).toBe(all.length);
      }),
      { numRuns: 25 },
    );
  });
});
