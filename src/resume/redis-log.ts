import { Redis, type ChainableCommander } from "ioredis";
import type { Log } from "../log.js";
import { idOfBlock, type LoggedEvents } from "./logged.js";
import type { Cursor, LogStats, RunEnd, RunInfo, RunLog, RunStart } from "./log.js";
import type { LogCaps } from "./memory-log.js";
import { RedisCursor, type CursorHost } from "./redis-cursor.js";
import { field, firstOf, partOf, runKey, threadKey } from "./redis-entries.js";
import { Tail } from "./redis-tail.js";

/**
 * The event log in Redis Streams (`--store redis://HOST:PORT/DB`, protocol/README.md §16), shared
 * by every proxy replica and middleware worker that names the same database, and kept across their
 * restarts. Per run, under `agui-state:run:<run>:`:
 * - `events`: a stream; each part of the run as it was logged is one entry, `0-<n>` where n is the
 *   number of its first event (an explicit id, so the entry holding an event is the last at or before
 *   its number: no index), with fields `b` (the events' blocks one after another, each starting with
 *   its id line, so ids are not stored twice) and `e` (where each block ends
 *   in `b`, in UTF-16 code units, comma-separated); a last entry with field `end` says how the run
 *   ended. One entry a part, not one an event: a Redis command per event was most of redis-server's
 *   work (docs/benchmarks.md, "Figures behind choices in the source"). XADD carries a MAXLEN cap as
 *   a guard; the byte cap is the writer's.
 * - `meta`: a hash with the run's start (JSON) and, once it ended, `ended`.
 * - `owner`: a key the writing process refreshes while the run is live; when it lapses with no end
 *   written, the writer died, and readers end the run as cancelled.
 * - `readers`: a sorted set of reader ids scored by when they lapse; a run with any is not cancelled.
 * And `agui-state:thread:<path>\0<threadId>` names the thread's latest run.
 *
 * Every key has a TTL at all times (issue 38, item 3): a live run's keys lapse `liveTtlMs` (an hour)
 * after its last write, and every write and every heartbeat of its owner sets them again, so a run
 * live for hours stays resumable; an ended run's lapse after the retention; `owner` and `readers`
 * lapse a few beats after their last refresh. An XADD always goes with the PEXPIRE of its key in one
 * write, so an `events` key that lapsed and a late XADD made again still lapses; a writer that dies
 * leaves only keys that lapse. The total is held by Redis's own `maxmemory` (volatile-lru evicts the
 * least recently used runs first). No key holds the key credentials are hashed under (issue 38,
 * item 1): it comes from the operator's secret (open.ts).
 */
/** How often a live run's owner and the open cursors refresh their keys, and the writers' lapse is checked. */
const BEAT_MS = 1000;
/** A live run's `owner`, and a reader in `readers`, lapse this long after their last refresh. */
const LAPSE_MS = 3 * BEAT_MS;
const LIVE_TTL_MS = 60 * 60 * 1000;
const MAXLEN = 1_000_000;

export interface RedisLogOptions {
  /** How long a live run's keys are kept after its last write or heartbeat (default an hour). */
  liveTtlMs?: number;
}

interface Writing {
  seq: number;
  bytes: number;
  thread: string;
}

/** Opens the log on `url` (nothing else: no key is read from or written to Redis). */
export async function openRedisLog(url: string, caps: LogCaps, log: Log, options: RedisLogOptions = {}): Promise<{ runLog: RedisLog }> {
  // Every command is written at once and in order (no auto-pipelining, which holds commands for a tick
  // and would let a MULTI overtake the XADDs issued before it): the log is kept in the order it was written.
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2, connectTimeout: 5000 });
  redis.on("error", (e: Error) => log.warn({ err: e.message }, "redis: connection error"));
  try {
    await redis.connect();
    return { runLog: new RedisLog(redis, caps, log, options) };
  } catch (e) {
    // Else the client goes on reconnecting, and holds the process open, for a store nobody will use.
    redis.disconnect();
    throw e;
  }
}

export class RedisLog implements RunLog, CursorHost {
  readonly tail: Tail;
  private readonly writing = new Map<string, Writing>();
  private readonly cursors = new Set<RedisCursor>();
  private readonly liveTtlMs: number;
  private readonly beat: NodeJS.Timeout;
  private evicted = 0;
  private held = 0;

  /** Takes `redis` (its one connection for commands; the tail opens one more, the first time a cursor waits) and closes it on close(). */
  constructor(
    readonly redis: Redis,
    private readonly caps: Pick<LogCaps, "retentionMs" | "maxRunBytes">,
    readonly log: Log,
    options: RedisLogOptions = {},
  ) {
    this.liveTtlMs = options.liveTtlMs ?? LIVE_TTL_MS;
    this.tail = new Tail(redis, log);
    // One timer for every run and cursor of the process, not one each.
    this.beat = setInterval(() => this.heartbeat(), BEAT_MS);
    this.beat.unref();
  }

  async begin(run: string, start: RunStart): Promise<void> {
    const thread = threadKey(start.threadId, start.path);
    // The prelude counts against the run's cap as its events do (log.ts, RunStart.prelude).
    let bytes = 0;
    for (const b of start.prelude) bytes += Buffer.byteLength(b, "utf8");
    this.writing.set(run, { seq: 0, bytes, thread });
    const ttl = this.liveTtlMs;
    await this.redis
      .multi()
      .hset(runKey(run, "meta"), "start", JSON.stringify(start))
      .pexpire(runKey(run, "meta"), ttl)
      .set(runKey(run, "owner"), "1", "PX", LAPSE_MS)
      .set(thread, run, "PX", ttl)
      .exec();
  }

  append(run: string, events: LoggedEvents): void {
    const w = this.writing.get(run);
    if (!w || events.ends.length === 0) return;
    const bytes = Buffer.byteLength(events.text, "utf8");
    if (w.bytes + bytes > this.caps.maxRunBytes) return void this.drop(run, "unresumable");
    w.bytes += bytes;
    const key = runKey(run, "events");
    const first = w.seq + 1;
    w.seq += events.ends.length;
    // One write for the whole part, issued in order on one connection, so Redis holds the parts in
    // order; never awaited on the stream's path. The PEXPIREs ride with the XADD: an `events` key
    // that lapsed and this XADD made again gets its TTL, and every write keeps the run's keys an
    // hour from now (a run live for hours stays resumable).
    const p = this.redis.pipeline().xadd(key, "MAXLEN", "~", MAXLEN, `0-${first}`, "b", events.text, "e", events.ends.join(","));
    this.refresh(p, run, w).exec().then(
      (r) => this.settled(run, r),
      (err: Error) => this.failed(run, err),
    );
  }

  end(run: string, reason: RunEnd): void {
    const w = this.writing.get(run);
    if (!w) return;
    this.writing.delete(run);
    const ttl = Math.max(1, this.caps.retentionMs);
    this.redis
      .multi()
      .xadd(runKey(run, "events"), `0-${w.seq + 1}`, "end", reason)
      .pexpire(runKey(run, "events"), ttl)
      .hset(runKey(run, "meta"), "ended", reason, "events", String(w.seq))
      .pexpire(runKey(run, "meta"), ttl)
      // The thread's key may name a later run by now, whose owner sets it again within a beat.
      .pexpire(w.thread, ttl)
      .del(runKey(run, "owner"))
      .exec()
      .then(
        (r) => this.settled(run, r),
        (err: Error) => this.failed(run, err),
      );
  }

  async find(run: string): Promise<RunInfo | undefined> {
    const [meta, last] = await Promise.all([this.redis.hgetall(runKey(run, "meta")), this.redis.xrevrange(runKey(run, "events"), "+", "-", "COUNT", 1)]);
    if (meta["start"] === undefined) return undefined;
    const ended = meta["ended"] as RunEnd | undefined;
    const entry = last[0];
    const live = entry === undefined || field(entry[1], "e") === undefined ? 0 : firstOf(entry[0]) + partOf(entry[1]).ends.length - 1;
    return { ...(JSON.parse(meta["start"]) as RunStart), run, events: ended === undefined ? live : Number(meta["events"]), ended };
  }

  async idAt(run: string, seq: number): Promise<string | undefined> {
    // Number 0 is the opening block's id, kept with the run's start (it is no event of the stream).
    if (seq === 0) {
      const start = await this.redis.hget(runKey(run, "meta"), "start");
      return start === null ? undefined : (JSON.parse(start) as Partial<RunStart>).opening;
    }
    if (seq < 0) return undefined;
    const entries = await this.redis.xrevrange(runKey(run, "events"), `0-${seq}`, "-", "COUNT", 1);
    const entry = entries[0];
    if (entry === undefined || field(entry[1], "e") === undefined) return undefined;
    const part = partOf(entry[1]);
    const k = seq - firstOf(entry[0]);
    if (k >= part.ends.length) return undefined;
    return idOfBlock(part.text.slice(k === 0 ? 0 : part.ends[k - 1], part.ends[k]));
  }

  async latest(threadId: string, path: string): Promise<string | undefined> {
    return (await this.redis.get(threadKey(threadId, path))) ?? undefined;
  }

  open(run: string, afterSeq: number): Promise<Cursor> {
    const cursor = new RedisCursor(this, run, afterSeq);
    this.cursors.add(cursor);
    // Not awaited: the cursor's first read goes after it on the same connection, so Redis counts the
    // reader before it answers the read, and the first page waits one round trip less.
    this.markReaders(this.redis.pipeline(), run, [cursor])
      .exec()
      .catch(() => {});
    return Promise.resolve(cursor);
  }

  /** A cursor closed (redis-cursor.ts): it no longer counts among its run's readers. */
  closed(cursor: RedisCursor): void {
    if (!this.cursors.delete(cursor)) return;
    this.redis.zrem(runKey(cursor.run, "readers"), cursor.id).catch(() => {});
  }

  async readers(run: string): Promise<number> {
    return this.redis.zcount(runKey(run, "readers"), Date.now(), "+inf");
  }

  hold(bytes: number): void {
    this.held += bytes;
  }

  /**
   * Nothing to shed: the events are in Redis, whose own `maxmemory` caps them, and the process holds
   * only the writers' counts and the pages on their way to clients (hold), which are not its to drop.
   */
  shed(bytes: number): string[] {
    void bytes;
    return [];
  }

  stats(): LogStats {
    let bytes = this.held;
    for (const w of this.writing.values()) bytes += w.bytes;
    return { runs: this.writing.size, bytes, evicted: this.evicted };
  }

  async close(): Promise<void> {
    clearInterval(this.beat);
    this.writing.clear();
    for (const c of [...this.cursors]) c.close();
    this.tail.close();
    await this.redis.quit().catch(() => {});
  }

  /** Sets a live run's keys to lapse `liveTtlMs` from now (its owner a few beats from now); `events` first, right behind an XADD. */
  private refresh(p: ChainableCommander, run: string, w: Writing): ChainableCommander {
    return p
      .pexpire(runKey(run, "events"), this.liveTtlMs)
      .pexpire(runKey(run, "meta"), this.liveTtlMs)
      .pexpire(w.thread, this.liveTtlMs)
      .set(runKey(run, "owner"), "1", "PX", LAPSE_MS);
  }

  /** Counts `cursors` (all of `run`) among the run's readers for a few beats; `readers` gets its TTL with every ZADD. */
  private markReaders(p: ChainableCommander, run: string, cursors: readonly RedisCursor[]): ChainableCommander {
    const key = runKey(run, "readers");
    const until = Date.now() + LAPSE_MS;
    const members: (string | number)[] = [];
    for (const c of cursors) members.push(until, c.id);
    // The set lapses with its last member: every member's score is at most `until`.
    return p.zadd(key, ...members).pexpire(key, LAPSE_MS).zremrangebyscore(key, "-inf", Date.now());
  }

  /**
   * Each beat, in one write: every live run's keys set again (a run quiet for an hour, a long tool
   * call, stays resumable), every open cursor counted again among its run's readers, and the
   * `owner` of every run a cursor waits on looked at: one that lapsed ends those cursors' reads.
   */
  private heartbeat(): void {
    if (this.writing.size === 0 && this.cursors.size === 0) return;
    const p = this.redis.pipeline();
    for (const [run, w] of this.writing) this.refresh(p, run, w);
    const byRun = new Map<string, RedisCursor[]>();
    for (const c of this.cursors) {
      const list = byRun.get(c.run);
      if (list) list.push(c);
      else byRun.set(c.run, [c]);
    }
    const watched: string[] = [];
    for (const [run, list] of byRun) {
      this.markReaders(p, run, list);
      if (list.some((c) => c.waiting) && !this.writing.has(run)) watched.push(run);
    }
    for (const run of watched) p.exists(runKey(run, "owner"));
    const checks = p.length - watched.length;
    p.exec().then(
      (results) => {
        watched.forEach((run, i) => {
          const [err, n] = results?.[checks + i] ?? [null, 1];
          if (err || n !== 0) return;
          for (const c of byRun.get(run) ?? []) c.lapsed();
        });
      },
      (err: Error) => this.log.warn({ err: err.message }, "redis: a heartbeat failed"),
    );
  }

  private drop(run: string, reason: RunEnd): void {
    if (reason === "evicted") this.evicted++;
    this.end(run, reason);
  }

  /** A pipeline's or a transaction's replies: the first error in them is a failed write. */
  private settled(run: string, results: [Error | null, unknown][] | null): void {
    const err = results?.find(([e]) => e)?.[0];
    if (err) this.failed(run, err);
  }

  private failed(run: string, err: Error): void {
    this.log.warn({ run, err: err.message }, "redis: a write to the run log failed; the run may not be resumable");
  }
}
