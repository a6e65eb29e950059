import { randomBytes, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { Log } from "../log.js";
import type { Stamped } from "./stamp.js";
import type { Follower, LogStats, RunEnd, RunInfo, RunLog, RunStart } from "./log.js";
import type { LogCaps } from "./memory-log.js";

/**
 * The event log in Redis Streams (`--store redis://HOST:PORT/DB`, protocol/README.md §16), shared
 * by every proxy replica and middleware worker that names the same database, and kept across their
 * restarts. Per run, under `agui-state:run:<run>:`:
 * - `events`: a stream; event n is the entry `0-n` (XADD with that explicit id, so a Last-Event-ID
 *   maps to an entry with no index), field `b` (the block, whose first line is the event's id, so the
 *   id is not stored twice: docs/benchmarks.md, B21); a last entry with field `end`
 *   says how the run ended. XADD carries a MAXLEN cap as a guard; the byte cap is the writer's.
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
/**
 * Appends one part's events as entries `0-<seq>`, `0-<seq+1>`, …: KEYS[1] the run's stream, ARGV[1]
 * the MAXLEN guard, ARGV[2] the first event's number, ARGV[3] the events' blocks one after another
 * (each ends at its one blank line, stamp.ts, so they are split there: one argument for the client
 * to write, not one per event). EVAL, not EVALSHA: ioredis answers NOSCRIPT by sending the script
 * again later, after commands issued since, which would break the order the log is written in.
 * Redis caches the compiled script by its hash.
 */
const APPEND = `local seq = tonumber(ARGV[2])
local s = ARGV[3]
local from = 1
while from <= #s do
  local stop = string.find(s, '\\n\\n', from, true)
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '0-' .. seq, 'b', string.sub(s, from, stop + 1))
  seq = seq + 1
  from = stop + 2
end
return seq`;

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

  append(run: string, events: readonly Stamped[]): void {
    const w = this.writing.get(run);
    if (!w) return;
    let bytes = 0;
    for (const e of events) bytes += Buffer.byteLength(e.block, "utf8");
    if (w.bytes + bytes > this.caps.maxRunBytes) return void this.drop(run, "unresumable");
    w.bytes += bytes;
    const key = runKey(run, "events");
    const first = w.seq + 1;
    w.seq += events.length;
    // One command for the whole part, issued in order on one connection, so Redis holds the events in
    // order; never awaited on the stream's path. A command per event cost the proxy most of its
    // throughput in the client's work per command (docs/benchmarks.md, B19).
    let blocks = "";
    for (const e of events) blocks += e.block;
    this.redis.call("EVAL", APPEND, 1, key, MAXLEN, first, blocks).catch((err: Error) => this.failed(run, err));
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
    const [meta, length] = await Promise.all([this.redis.hgetall(runKey(run, "meta")), this.redis.xlen(runKey(run, "events"))]);
    if (meta["start"] === undefined) return undefined;
    const ended = meta["ended"] as RunEnd | undefined;
    return { ...(JSON.parse(meta["start"]) as RunStart), run, events: ended === undefined ? length : Number(meta["events"]), ended };
  }

  async idAt(run: string, seq: number): Promise<string | undefined> {
    // Number 0 is the opening block's id, kept with the run's start (it is no event of the stream).
    if (seq === 0) {
      const start = await this.redis.hget(runKey(run, "meta"), "start");
      return start === null ? undefined : (JSON.parse(start) as Partial<RunStart>).opening;
    }
    const entries = await this.redis.xrange(runKey(run, "events"), `0-${seq}`, `0-${seq}`);
    const block = field(entries[0]?.[1], "b");
    return block === undefined ? undefined : idOf(block);
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
    // Delivers entries; true when one of them ended the run.
    const deliver = (entries: [string, string[]][]): boolean => {
      const list: Stamped[] = [];
      for (const [, fields] of entries) {
        const end = field(fields, "end");
        if (end !== undefined) {
          if (list.length > 0) follower.events(list);
          follower.end(end as RunEnd);
          return true;
        }
        const block = field(fields, "b") as string;
        list.push({ id: idOf(block), block });
      }
      if (list.length > 0) follower.events(list);
      return false;
    };
    const loop = async () => {
      let last = `0-${afterSeq}`;
      try {
        const first = await this.redis.xrange(key, `(${last}`, "+");
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

/** The id of a logged block: its first line is `id: <id>` (stamp.ts). */
const idOf = (block: string): string => block.slice(4, block.indexOf("\n"));

/** A field's value in a stream entry's flat [name, value, ...] list. */
function field(fields: string[] | undefined, name: string): string | undefined {
  if (!fields) return undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}
