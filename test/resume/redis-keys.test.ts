import { createHmac } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { afterEach, describe, expect } from "vitest";
import { redis, startRedis } from "../../scripts/harness/redis.js";
import { startProxy } from "../proxy/proxy-process.js";
import { TestUpstream } from "../proxy/upstream.js";
import { pacedAgent } from "./paced-agent.js";

/**
 * Redis that keeps its promise, through the real proxy on a real redis-server (issue 38,
 * protocol/README.md §16): every key the run log writes has a TTL while its run is live and after it
 * ended, and no key, field or member holds the operator's secret or the key made from it. (The run
 * log's own tests, test/resume/redis-ttl.test.ts, take the refresh, a late write and a dead writer.)
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

/** Every key of the database with its PTTL, and every string it holds (stream entries, hash fields and values, set members). */
async function keysOf(db: Redis): Promise<{ ttls: Record<string, number>; texts: string[] }> {
  const ttls: Record<string, number> = {};
  const texts: string[] = [];
  for (const key of await db.keys("*")) {
    ttls[key] = await db.pttl(key);
    texts.push(key);
    const type = await db.type(key);
    if (type === "string") texts.push((await db.get(key)) ?? "");
    else if (type === "hash") texts.push(...Object.entries(await db.hgetall(key)).flat());
    else if (type === "zset") texts.push(...(await db.zrange(key, "0", "-1")));
    else if (type === "stream") for (const [, fields] of await db.xrange(key, "-", "+")) texts.push(...fields);
  }
  return { ttls, texts };
}

describe("the Redis run log's keys, through the proxy", () => {
  redis.test("every key has a TTL during the run and after it, and none holds the secret or its key", async () => {
    const store = await startRedis();
    const db = new Redis(store.port, "127.0.0.1");
    closers.push(async () => void (await db.quit()));
    const secret = "a secret of more than thirty-two bytes, for this test alone";
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "agui-secret-")), "secret");
    fs.writeFileSync(file, `${secret}\n`);
    const agent = pacedAgent(3);
    const upstream = await TestUpstream.start({ "/agent": agent.handler });
    closers.push(() => upstream.close());
    const proxy = await startProxy(upstream.url, ["--store", store.url, "--secret-file", file, "--log-level", "silent"]);
    const answer = fetch(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json", authorization: "Bearer alice" }, body: JSON.stringify({ threadId: "t1", runId: "r1", state: {}, messages: [] }) });
    await agent.paused();
    // Live: the writer's first part is in (its XADD may trail the upstream's write by a moment).
    const live = await (async () => {
      for (;;) {
        const k = await keysOf(db);
        if (Object.keys(k.ttls).some((key) => key.endsWith(":events"))) return k;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    agent.go();
    await (await answer).text();
    const ended = await (async () => {
      for (;;) {
        const k = await keysOf(db);
        if (k.texts.some((t) => t.includes("RUN_FINISHED"))) return k;
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const derived = createHmac("sha256", "agui-state resume credentials").update(secret).digest();
    const forbidden = [secret, derived.toString("base64"), derived.toString("base64url"), derived.toString("hex"), derived.toString("latin1")];
    for (const [when, k] of [["live", live], ["ended", ended]] as const) {
      // Live: events, meta, owner and the thread's key; ended: the owner is gone.
      expect(Object.keys(k.ttls).length, when).toBeGreaterThanOrEqual(when === "live" ? 4 : 3);
      for (const [key, ttl] of Object.entries(k.ttls)) expect(ttl, `${when}: ${key}`).toBeGreaterThan(0);
      expect(Object.keys(k.ttls), when).not.toContain("agui-state:key");
      for (const text of k.texts) for (const f of forbidden) expect(text.includes(f), `${when}: a key holds the secret`).toBe(false);
    }
  });
});
