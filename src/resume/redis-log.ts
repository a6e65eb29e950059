import { randomBytes, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { Log } from "../log.js";
import { idOfBlock, type LoggedEvents } from "./logged.js";
import type { Follower, LogStats, RunEnd, RunInfo, RunLog, RunStart } from "./log.js";
import type { LogCaps } from "./memory-log.js";

/**
 * The event log in Redis Streams (`--store redis://HOST:PORT/DB`, protocol/README.md §16), shared
 * by every proxy replica and middleware worker that names the same database, and kept across their
 * restarts. Per run, under `agui-state:run:<run>:`:
 * - `events`: a stream; each part of the run as it was logged is one entry, `0-<n>` where n is the
 *   number of its first event (an explicit id, so the entry holding an event is the last at or before
 *   its number: no index), with fields `b` (the events' blocks one after another, each starting with
 *   its id line, so ids are not stored twice: docs/benchmarks.md, B21) and `e` (where each block ends
 *   in `b`, in UTF-16 code units, comma-separated); a last entry with field `end` says how the run
 *   ended. One entry a part, not one an event: a Redis command per event was most of redis-server's
 *   work and held B19r under its target. XADD carries a MAXLEN cap as a guard; the byte cap is the
 *   writer's.
 * - `meta`: a hash with the run's start (JSON) and, once it ended, `ended`.
 * - `owner`: a key the writing process refreshes while the run is live; when it lapses with no end
 *   written, the writer died, and readers end the run as cancelled.
 * - `readers`: a sorted set of reader ids scored by when they lapse; a run with any is not cancelled.
 * And `agui-state:thread:<path>\0<threadId>` names the thread's latest run. Every key expires: a live
 * run's an hour after its last write, an ended run's after the retention. The total is held by
 * Redis's own `maxmemory` (volatile-lru evicts the least recently used runs first).
 */
const P = "agui-state:";
const runKey = (run: string, part: string): string => `${P}run:${run}:${part}`;
const threadKey = (threadId: string, path: string): string => `${P}thread:${path}\0${threadId}`;
/** How often a live run's owner and a reader refresh their keys, and how long a tailing read blocks. */
const BEAT_MS = 1000;
const LIVE_TTL_MS = 60 * 60 * 1000;
const MAXLEN = 1_000_000;
interface Writing {
  seq: number;
  bytes: number;
  beat: NodeJS.Timeout;
}

/** Opens the log and reads (or, first, writes) the key credentials are hashed under, shared by all who use this database. */
export async function openRedisLog(url: string, caps: LogCaps, log: Log): Promise<{ runLog: RedisLog; key: Buffer }> {
  // Every command is written at once and in order (no auto-pipelining, which holds commands for a tick
  // and would let a MULTI overtake the XADDs issued before it): the log is kept in the order it was written.
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2, connectTimeout: 5000 });
  redis.on("error", (e: Error) => log.warn({ err: e.message }, "redis: connection error"));
  try {
    await redis.connect();
    await redis.set(`${P}key`, randomBytes(32).toString("base64"), "NX");
    const key = await redis.get(`${P}key`);
    if (key === null) throw new Error("the credential key vanished from Redis as it was written");
    return { runLog: new RedisLog(redis, caps, log), key: Buffer.from(key, "base64") };
  } catch (e) {
    // Else the client goes on reconnecting, and holds the process open, for a store nobody will use.
    redis.disconnect();
    throw e;
  }
}

export class RedisLog implements RunLog {
  private readonly writing = new Map<string, Writing>();
  private evicted = 0;

  constructor(
    private readonly redis: Redis,
    private readonly caps: LogCaps,
    private readonly log: Log,
  ) {}

  async begin(run: string, start: RunStart): Promise<void> {
    const w: Writing = { seq: 0, bytes: 0, beat: setInterval(() => this.beat(run), BEAT_MS) };
    w.beat.unref();
    this.writing.set(run, w);
    await this.redis
      .multi()
      .hset(runKey(run, "meta"), "start", JSON.stringify(start))
      .pexpire(runKey(run, "meta"), LIVE_TTL_MS)
      .set(runKey(run, "owner"), "1", "PX", 3 * BEAT_MS)
      .set(threadKey(start.threadId, start.path), run, "PX", LIVE_TTL_MS + this.caps.retentionMs)
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
    // One command for the whole part, issued in order on one connection, so Redis holds the parts in
    // order; never awaited on the stream's path.
    this.redis.xadd(key, "MAXLEN", "~", MAXLEN, `0-${first}`, "b", events.text, "e", events.ends.join(",")).catch((err: Error) => this.failed(run, err));
    if (first === 1) this.redis.pexpire(key, LIVE_TTL_MS).catch((err: Error) => this.failed(run, err));
  }

  end(run: string, reason: RunEnd): void {
    const w = this.writing.get(run);
    if (!w) return;
    clearInterval(w.beat);
    this.writing.delete(run);
    const ttl = this.caps.retentionMs;
    this.redis
      .multi()
      .xadd(runKey(run, "events"), `0-${w.seq + 1}`, "end", reason)
      .hset(runKey(run, "meta"), "ended", reason, "events", String(w.seq))
      .pexpire(runKey(run, "events"), ttl)
      .pexpire(runKey(run, "meta"), ttl)
      .del(runKey(run, "owner"))
      .exec()
      .catch((err: Error) => this.failed(run, err));
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

  async follow(run: string, afterSeq: number, follower: Follower): Promise<() => void> {
    const reader = randomUUID();
    const readers = runKey(run, "readers");
    const key = runKey(run, "events");
    // A blocking read holds its connection: each follower reads on one of its own.
    const tail = this.redis.duplicate();
    let stopped = false;
    const stop = () => {
      if (stopped) return;
      stopped = true;
      clearInterval(beat);
      tail.disconnect();
      this.redis.zrem(readers, reader).catch(() => {});
    };
    const mark = () => this.redis.zadd(readers, Date.now() + 3 * BEAT_MS, reader).catch(() => 0);
    const beat = setInterval(() => void mark(), BEAT_MS);
    beat.unref();
    // Not awaited: the read below goes after it on the same connection, so Redis counts the reader
    // before it answers the read, and the first replayed event waits one round trip less (B20).
    void mark();
    // Delivers entries, the first from event `afterSeq + 1` on; true when one of them ended the run.
    const deliver = (entries: [string, string[]][]): boolean => {
      for (const [id, fields] of entries) {
        const end = field(fields, "end");
        if (end !== undefined) {
          follower.end(end as RunEnd);
          return true;
        }
        const part = partOf(fields);
        const skip = afterSeq + 1 - firstOf(id);
        if (skip < part.ends.length) follower.events(skip <= 0 ? part : after(part, skip));
      }
      return false;
    };
    const loop = async () => {
      let last = `0-${afterSeq}`;
      try {
        // The part holding the event after `afterSeq`, and every part after it.
        const holding = await this.redis.xrevrange(key, `0-${afterSeq + 1}`, "-", "COUNT", 1);
        const held = holding[0] !== undefined && field(holding[0][1], "e") !== undefined ? holding[0][0] : undefined;
        const first = await this.redis.xrange(key, held ?? `(${last}`, "+");
        if (deliver(first)) return stop();
        if (first.length > 0) last = (first[first.length - 1] as [string, string[]])[0];
        while (!stopped) {
          const got = (await tail.xread("BLOCK", BEAT_MS, "STREAMS", key, last)) as [string, [string, string[]][]][] | null;
          if (stopped) return;
          const entries = got?.[0]?.[1] ?? [];
          if (deliver(entries)) return stop();
          if (entries.length > 0) last = (entries[entries.length - 1] as [string, string[]])[0];
          else if ((await this.redis.exists(runKey(run, "owner"))) === 0) {
            // Nothing came for a beat and the writer's key lapsed: it died without ending the run.
            const more = await this.redis.xrange(key, `(${last}`, "+");
            if (deliver(more)) return stop();
            follower.end("cancelled");
            return stop();
          }
        }
      } catch (e) {
        if (stopped) return;
        this.log.warn({ run, err: (e as Error).message }, "redis: a rejoin's read failed; ending it");
        follower.end("cancelled");
        stop();
      }
    };
    void loop();
    return stop;
  }

  async readers(run: string): Promise<number> {
    return this.redis.zcount(runKey(run, "readers"), Date.now(), "+inf");
  }

  stats(): LogStats {
    let bytes = 0;
    for (const w of this.writing.values()) bytes += w.bytes;
    return { runs: this.writing.size, bytes, evicted: this.evicted };
  }

  async close(): Promise<void> {
    for (const w of this.writing.values()) clearInterval(w.beat);
    this.writing.clear();
    await this.redis.quit().catch(() => {});
  }

  private beat(run: string): void {
    this.redis.set(runKey(run, "owner"), "1", "PX", 3 * BEAT_MS).catch((err: Error) => this.failed(run, err));
  }

  private drop(run: string, reason: RunEnd): void {
    if (reason === "evicted") this.evicted++;
    this.end(run, reason);
  }

  private failed(run: string, err: Error): void {
    this.log.warn({ run, err: err.message }, "redis: a write to the run log failed; the run may not be resumable");
  }
}

/** A field's value in a stream entry's flat [name, value, ...] list. */
function field(fields: string[] | undefined, name: string): string | undefined {
  if (!fields) return undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

/** The number of the first event of the part an entry id `0-<n>` holds. */
const firstOf = (id: string): number => Number(id.slice(2));

/** A part's entry as LoggedEvents. */
function partOf(fields: string[]): LoggedEvents {
  return { text: field(fields, "b") ?? "", ends: (field(fields, "e") ?? "").split(",").map(Number) };
}

/** A part less its first `skip` events. */
function after(part: LoggedEvents, skip: number): LoggedEvents {
  const from = part.ends[skip - 1] as number;
  return { text: part.text.slice(from), ends: part.ends.slice(skip).map((e) => e - from) };
}
