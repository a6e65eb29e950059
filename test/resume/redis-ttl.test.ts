import { randomBytes } from "node:crypto";
import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect } from "vitest";
import { createLogger } from "../../src/log.js";
import type { Page, RunStart } from "../../src/resume/log.js";
import { credentialOf, DEFAULT_POLICY } from "../../src/resume/credentials.js";
import { openRunLog } from "../../src/resume/open.js";
import { openRedisLog, RedisLog } from "../../src/resume/redis-log.js";
import { redis, startRedis, type RunningRedis } from "../../scripts/harness/redis.js";
import { loggedBlocks } from "./logged-blocks.js";
import { blockOf } from "./cursor-pages.js";

/**
 * The Redis store keeps its promise (issue 38, item 3), on a real redis-server: every key it writes
 * has a TTL at all times, during a run and after it, set again by each write and by the owner's
 * heartbeat (a run live for hours stays resumable), also on an `events` key a late XADD made again;
 * a writer that dies leaves only keys that lapse; cursors share the process's connections; and no
 * key holds the key credentials are hashed under (item 1).
 */
const START: RunStart = { threadId: "t", path: "/agent", credential: "c", status: 200, headers: {}, prelude: ["data: {}\n\n"], opening: "run.0.open" };
const CAPS = { retentionMs: 60_000, maxRunBytes: 1e9, maxTotalBytes: 1e10 };
const silent = createLogger("silent");

// A redis-server for each test: the harness ends every child a test started after it (teardown.ts).
let server: RunningRedis;
let admin: Redis;
let log: RedisLog;
beforeEach(async () => {
  if (!redis.available) return;
  server = await startRedis();
  admin = new Redis(server.url);
  log = (await openRedisLog(server.url, CAPS, silent)).runLog;
});
afterEach(async () => {
  if (!redis.available) return;
  await log.close();
  admin.disconnect();
});

/** Every key in the database (SCAN, as an operator would). */
async function allKeys(): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await admin.scan(cursor, "COUNT", 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== "0");
  return keys.sort();
}

/** Each key's PTTL (-1: no TTL). */
async function pttls(keys: readonly string[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = await admin.pttl(k);
  return out;
}

const runKeys = (run: string): string[] => ["events", "meta", "owner"].map((p) => `agui-state:run:${run}:${p}`);
const THREAD = `agui-state:thread:${START.path}\0${START.threadId}`;

/** Resolves once `check` holds (asked again every 100 ms), or fails with what it last saw. */
async function until<T>(what: string, get: () => Promise<T>, check: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await get();
    if (check(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("RedisLog keys and connections", () => {
  redis.test("every key in the database has a TTL during a live run (with a reader) and after it ended", async () => {
    await log.begin("run1", START);
    log.append("run1", loggedBlocks([blockOf("run1", 1, "a"), blockOf("run1", 2, "b")]));
    const cursor = await log.open("run1", 0);
    expect((await cursor.read(65536)).events?.ends.length).toBe(2);
    const live = await allKeys();
    expect(live).toEqual([...runKeys("run1"), "agui-state:run:run1:readers", THREAD].sort());
    for (const [k, t] of Object.entries(await pttls(live))) expect([k, t > 0]).toEqual([k, true]);
    cursor.close();
    log.end("run1", "finished");
    await log.find("run1");
    const ended = await allKeys();
    expect(ended).not.toContain("agui-state:run:run1:owner");
    // An ended run's keys lapse after the retention.
    for (const [k, t] of Object.entries(await pttls(ended))) expect([k, t > 0 && t <= CAPS.retentionMs]).toEqual([k, true]);
  });

  redis.test("each write sets a live run's keys to lapse an hour from now again, and so does the owner's beat with no write", async () => {
    await log.begin("run1", START);
    log.append("run1", loggedBlocks([blockOf("run1", 1, "a")]));
    await log.find("run1");
    const keys = [...runKeys("run1"), THREAD];
    for (const k of keys) await admin.pexpire(k, 2000);
    log.append("run1", loggedBlocks([blockOf("run1", 2, "b")]));
    // find goes after the append's write on the log's connection: once it answers, Redis has the write.
    await log.find("run1");
    for (const [k, t] of Object.entries(await pttls(keys))) expect([k, t > 2000]).toEqual([k, true]);
    for (const k of keys) await admin.pexpire(k, 2000);
    await until("the keys' PTTLs after a beat", () => pttls(keys), (t) => Object.values(t).every((v) => v > 2000));
  });

  redis.test("an events key removed and written again by a late XADD (or the run's end) gets its TTL", async () => {
    await log.begin("run1", START);
    log.append("run1", loggedBlocks([blockOf("run1", 1, "a")]));
    await admin.del("agui-state:run:run1:events");
    log.append("run1", loggedBlocks([blockOf("run1", 2, "b")]));
    await log.find("run1");
    expect(await admin.xlen("agui-state:run:run1:events")).toBe(1);
    expect(await admin.pttl("agui-state:run:run1:events")).toBeGreaterThan(0);
    await admin.del("agui-state:run:run1:events");
    log.end("run1", "finished");
    await log.find("run1");
    expect(await admin.pttl("agui-state:run:run1:events")).toBeGreaterThan(0);
  });

  redis.test("a writer that dies mid-run leaves only keys with a TTL; its readers end cancelled; every key lapses", async () => {
    const dying = new RedisLog(new Redis(server.url), CAPS, silent, { liveTtlMs: 1500 });
    try {
      await dying.begin("run1", START);
      dying.append("run1", loggedBlocks([blockOf("run1", 1, "a")]));
      const own = await dying.open("run1", 0);
      await own.read(65536);
      const reader = await log.open("run1", 1);
      const read: Promise<Page> = reader.read(65536);
      // Dead: its connection gone, no end written, its cursor never closed.
      dying.redis.disconnect();
      const left = await allKeys();
      expect(left.length).toBeGreaterThanOrEqual(4);
      for (const [k, t] of Object.entries(await pttls(left))) expect([k, t > 0 || t === -2]).toEqual([k, true]);
      expect(await read).toEqual({ end: "cancelled" });
      reader.close();
      await until("the keys the dead writer left", allKeys, (keys) => keys.length === 0);
    } finally {
      await dying.close();
    }
  });

  redis.test("cursors share the process's connections: 20 waiting on 20 runs take no more than 1, and each gets its events", async () => {
    const clients = async () => (String(await admin.client("LIST")).trim().split("\n").length);
    const blocked = async () => Number(/^blocked_clients:(\d+)/m.exec(await admin.info("clients"))?.[1]);
    const before = await clients();
    const runs = Array.from({ length: 20 }, (_, i) => `run${i}`);
    const reads: Promise<Page>[] = [];
    for (const [i, run] of runs.entries()) {
      await log.begin(run, START);
      const cursor = await log.open(run, 0);
      reads.push(cursor.read(65536));
      if (i === 0) {
        await until("the shared tail blocked", blocked, (n) => n === 1);
        expect(await clients()).toBe(before + 1);
      }
    }
    await until("the shared tail blocked", blocked, (n) => n === 1);
    expect(await clients()).toBe(before + 1);
    for (const run of runs) log.append(run, loggedBlocks([blockOf(run, 1, run)]));
    const pages = await Promise.all(reads);
    expect(pages.map((p) => p.events?.text)).toEqual(runs.map((run) => blockOf(run, 1, run)));
    expect(await clients()).toBe(before + 1);
  });

  redis.test("no key holds the secret or the key credentials are hashed under: no agui-state:key, and no value holds either in any encoding", async () => {
    const secret = randomBytes(32);
    const opened = await openRunLog({ store: { kind: "redis", url: server.url }, graceMs: 1000, ...CAPS, maxRuns: 100, policy: DEFAULT_POLICY, secret }, silent);
    expect(opened).not.toBeNull();
    const { log: runLog, key } = opened as NonNullable<typeof opened>;
    try {
      const credential = credentialOf(key, DEFAULT_POLICY, { authorization: "Bearer a" });
      await runLog.begin("run1", { ...START, credential });
      runLog.append("run1", loggedBlocks([blockOf("run1", 1, "a")]));
      runLog.end("run1", "finished");
      await runLog.find("run1");
      const keys = await allKeys();
      expect(keys).not.toContain("agui-state:key");
      const values: string[] = [...keys];
      for (const k of keys) {
        const type = await admin.type(k);
        if (type === "string") values.push((await admin.get(k)) ?? "");
        else if (type === "hash") values.push(...Object.entries(await admin.hgetall(k)).flat());
        else if (type === "stream") values.push(...(await admin.xrange(k, "-", "+")).flatMap(([id, f]) => [id, ...f]));
        else if (type === "zset") values.push(...(await admin.zrange(k, "0", "-1")));
        else throw new Error(`a key of type ${type}: ${k}`);
      }
      expect(values.join("\n")).toContain(credential);
      for (const held of [secret, key]) for (const encoding of ["base64", "base64url", "hex", "latin1"] as const) for (const v of values) expect(v.includes(held.toString(encoding))).toBe(false);
    } finally {
      await runLog.close();
    }
  });
});
