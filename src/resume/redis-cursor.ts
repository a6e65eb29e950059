import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { Log } from "../log.js";
import type { Cursor, Page, RunEnd } from "./log.js";
import { follows, PageCut, runKey, type Entry, type Position } from "./redis-entries.js";
import type { Tail } from "./redis-tail.js";

/** What a cursor's store gives it: the connection its reads go on, the shared tail, and its leaving. */
export interface CursorHost {
  readonly redis: Redis;
  readonly tail: Tail;
  readonly log: Log;
  closed(cursor: RedisCursor): void;
}

/** Why a waiting cursor woke: entries from the tail, its writer gone (redis-log.ts checks the owner), or its close. */
type Woken = Entry[] | "lapsed" | "closed";

const CANCELLED: Page = { end: "cancelled" };
/** Entries asked for per XRANGE at most: a page of small parts in one round trip, and no reply of a whole run. */
const MAX_COUNT = 1000;

/**
 * A reader's place in a run of the Redis store (log.ts, Cursor): pages from `XRANGE … COUNT`
 * (whole events, about the bytes asked for), then the live tail through the process's one shared
 * blocking read (redis-tail.ts). A run whose writer's `owner` key lapsed with no end written ends
 * `cancelled`. The cursor holds no more than the page it is cutting: an entry a page stopped
 * inside is read again for the next page rather than kept.
 */
export class RedisCursor implements Cursor {
  /** Its member in the run's `readers` sorted set. */
  readonly id = randomUUID();
  private readonly at: Position;
  private readonly key: string;
  /** Whether the first read found the entry holding the event after the start (it may begin before it). */
  private started = false;
  private ended: RunEnd | undefined;
  private isClosed = false;
  /** Whether it joined the shared tail (at its first wait): it leaves it at its close. */
  private joined = false;
  private woken: ((why: Woken) => void) | undefined;
  /** Mean characters an entry, to size XRANGE's COUNT to a page. */
  private meanEntry = 1024;

  constructor(
    private readonly host: CursorHost,
    readonly run: string,
    afterSeq: number,
  ) {
    this.at = { seq: afterSeq, partial: undefined };
    this.key = runKey(run, "events");
  }

  get waiting(): boolean {
    return this.woken !== undefined;
  }

  async read(maxBytes: number): Promise<Page> {
    if (this.ended !== undefined) return { end: this.ended };
    if (this.isClosed) return CANCELLED;
    try {
      for (;;) {
        const page = await this.fetch(maxBytes);
        if (this.isClosed) return CANCELLED;
        if (page) return this.give(page);
        const why = await this.wait();
        if (why === "closed") return CANCELLED;
        if (why === "lapsed") {
          // The writer's key lapsed: what it wrote before it went, then the run's end, or, with no end
          // written, `cancelled` (it died mid-run).
          const last = await this.fetch(maxBytes);
          return this.give(this.isClosed ? CANCELLED : (last ?? CANCELLED));
        }
        // What the shared read brought, if it goes on from the cursor; else the stream is read again.
        if (!follows(why, this.at.seq)) continue;
        const cut = new PageCut(this.at, maxBytes);
        cut.add(why);
        const woke = cut.page();
        if (woke) return this.give(woke);
      }
    } catch (e) {
      if (this.isClosed) return CANCELLED;
      this.host.log.warn({ run: this.run, err: (e as Error).message }, "redis: a rejoin's read failed; ending it");
      return this.give(CANCELLED);
    }
  }

  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.woken?.("closed");
    if (this.joined) this.host.tail.leave(this.key);
    this.host.closed(this);
  }

  /** The owner check found the run's writer gone: a waiting read looks once more, then ends. */
  lapsed(): void {
    this.woken?.("lapsed");
  }

  private give(page: Page): Page {
    if (page.end !== undefined) this.ended = page.end;
    return page;
  }

  /** The next page from the stream as it is now; undefined when there is nothing after the cursor yet. */
  private async fetch(maxBytes: number): Promise<Page | undefined> {
    const cut = new PageCut(this.at, maxBytes);
    let from = `0-${this.at.partial ?? this.at.seq + 1}`;
    for (;;) {
      const want = Math.min(MAX_COUNT, Math.max(2, Math.ceil(maxBytes / this.meanEntry) + 1));
      let entries: Entry[];
      let forward: number;
      if (!this.started) {
        // The entry holding the event after the start is the last at or before its number (entry ids
        // are `0-<first event>`): one XREVRANGE for it and one XRANGE for those after, in one round trip.
        const n = this.at.seq + 1;
        const [holding, after] = (await this.host.redis.pipeline().xrevrange(this.key, `0-${n}`, "-", "COUNT", 1).xrange(this.key, `0-${n + 1}`, "+", "COUNT", want).exec()) ?? [];
        if (holding?.[0] || after?.[0]) throw holding?.[0] ?? after?.[0];
        const fwd = (after?.[1] ?? []) as Entry[];
        entries = [...((holding?.[1] ?? []) as Entry[]), ...fwd];
        forward = fwd.length;
        this.started = true;
      } else {
        entries = (await this.host.redis.xrange(this.key, from, "+", "COUNT", want)) as Entry[];
        forward = entries.length;
      }
      this.learn(entries);
      const last = entries[entries.length - 1];
      if (!cut.add(entries) || forward < want || last === undefined) break;
      // Every entry was taken whole and the page wants more: on from the next entry.
      from = `0-${Number(last[0].slice(2)) + 1}`;
    }
    return cut.page();
  }

  private learn(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    let chars = 0;
    for (const [, fields] of entries) for (const f of fields) chars += f.length;
    this.meanEntry = Math.max(64, (this.meanEntry + chars / entries.length) / 2);
  }

  /** Waits on the shared tail for entries after the cursor, the writer's lapse, or the close. */
  private wait(): Promise<Woken> {
    return new Promise((resolve) => {
      let cancel = (): void => {};
      const wake = (why: Woken): void => {
        cancel();
        this.woken = undefined;
        resolve(why);
      };
      this.woken = wake;
      if (!this.joined) this.host.tail.join(this.key, this.at.seq);
      this.joined = true;
      cancel = this.host.tail.wait(this.key, this.at.seq, wake);
    });
  }
}
