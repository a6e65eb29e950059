import type { Redis } from "ioredis";
import type { Log } from "../log.js";
import { field, firstOf, partOf, type Entry } from "./redis-entries.js";

/** How long one blocking read waits before it is made again (a kick ends it sooner). */
const BLOCK_MS = 5000;
/** Entries one blocking read returns per stream: enough for a page of a live tail's small parts, never a whole run. */
const COUNT = 16;
/** The longest pause between two tries of a kick that came before its read was blocked. */
const MAX_KICK_PAUSE_MS = 50;

/** A stream the tail reads while a cursor on it is open. */
interface Stream {
  /** Open cursors that joined it. */
  cursors: number;
  /** The blocking read asks for the entries after `0-<after>`. */
  after: number;
  /** The last event the tail has seen in it (Infinity once it saw the run's end). */
  lastEvent: number;
  waiters: Set<(entries: Entry[]) => void>;
}

/**
 * The live tail of every run this process's cursors read, on ONE connection (issue 38, item 3:
 * followers share connections; protocol/README.md §16). One `XREAD BLOCK` names every stream an
 * open cursor has waited on; when entries come, the cursors waiting on that stream are woken with
 * them, and the stream stays in the read, from its last entry, for as long as a cursor on it is open.
 * So a cursor that took its page and waits again costs nothing; only a stream new to the read (or a
 * cursor behind the read's place) kicks it: `CLIENT UNBLOCK` (on the store's other connection) ends
 * the read at once, and the next one names it.
 *
 * Why this and not pub/sub (a PUBLISH per write, one subscriber connection): it costs the writer
 * nothing. Most runs are never rejoined, and a PUBLISH on every part would be one more command on
 * the stream's path for all of them; the blocking read costs only while somebody reads.
 *
 * A kick can reach Redis before the read it means to end (they go on two connections): UNBLOCK then
 * answers 0, and the kick is tried again a few milliseconds later, until the read names every stream
 * waited on from early enough.
 */
export class Tail {
  private readonly streams = new Map<string, Stream>();
  private conn: Redis | undefined;
  /** The blocking connection's CLIENT ID, for UNBLOCK; stale after its connection failed. */
  private id: number | undefined;
  private stale = true;
  /** The read in flight: each stream it names, from where; undefined between reads. */
  private reading: Map<string, number> | undefined;
  private running = false;
  private kicking = false;
  private closed = false;

  constructor(
    private readonly main: Redis,
    private readonly log: Log,
  ) {}

  /** A cursor on `key` starts reading its tail, after event `seq`; `leave` when it closes. */
  join(key: string, seq: number): void {
    const s = this.streams.get(key);
    if (s) s.cursors++;
    else this.streams.set(key, { cursors: 1, after: seq, lastEvent: seq, waiters: new Set() });
  }

  leave(key: string): void {
    const s = this.streams.get(key);
    if (s && --s.cursors === 0) this.streams.delete(key);
  }

  /** Wakes `wake` with the entries of the joined stream `key` after event `seq` once there are any; returns the cancel. */
  wait(key: string, seq: number, wake: (entries: Entry[]) => void): () => void {
    const s = this.streams.get(key);
    if (!s) return () => {};
    s.waiters.add(wake);
    // Behind what the tail has seen (it read the stream just before the tail took an entry): read from there.
    if (seq < s.lastEvent) {
      s.after = Math.min(s.after, seq);
      s.lastEvent = seq;
    }
    if (!this.running) void this.run();
    else this.kick(1);
    return () => void s.waiters.delete(wake);
  }

  close(): void {
    this.closed = true;
    this.streams.clear();
    this.conn?.disconnect();
  }

  private waited(): boolean {
    for (const s of this.streams.values()) if (s.waiters.size > 0) return true;
    return false;
  }

  /** Whether the read in flight names every stream waited on, from early enough. */
  private covers(reading: Map<string, number>): boolean {
    for (const [key, s] of this.streams) if (s.waiters.size > 0 && !((reading.get(key) ?? Infinity) <= s.after)) return false;
    return true;
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waited() && !this.closed) {
        // A connection of its own, opened the first time anybody waits: a blocked read holds it. A
        // command left unanswered when it drops fails (no resend), and the next read asks its new id.
        const conn = (this.conn ??= this.connect());
        if (this.stale) {
          this.stale = false;
          conn.client("ID").then(
            (id) => (this.id = id),
            () => (this.stale = true),
          );
        }
        const reading = new Map<string, number>();
        for (const [key, s] of this.streams) if (s.lastEvent !== Infinity) reading.set(key, s.after);
        if (reading.size === 0) break;
        this.reading = reading;
        let got: [string, Entry[]][] | null;
        try {
          // The typed command, not `call`: ioredis maps its RESP3 reply back to [[key, entries], ...].
          got = (await conn.xread("COUNT", COUNT, "BLOCK", BLOCK_MS, "STREAMS", ...reading.keys(), ...[...reading.values()].map((n) => `0-${n}`))) as [string, Entry[]][] | null;
        } catch (e) {
          if (this.closed) return;
          this.log.warn({ err: (e as Error).message }, "redis: the tail's read failed; reading again");
          this.stale = true;
          this.reading = undefined;
          // Meanwhile the owner check (redis-log.ts) ends the waiting cursors of a run whose writer is gone.
          await new Promise((r) => setTimeout(r, 1000).unref());
          continue;
        }
        this.reading = undefined;
        for (const [key, entries] of got ?? []) this.took(key, entries);
      }
    } finally {
      this.running = false;
      this.reading = undefined;
    }
  }

  /** Entries a read brought: the stream is read on from the last, and its waiters are woken with them. */
  private took(key: string, entries: Entry[]): void {
    const s = this.streams.get(key);
    const last = entries[entries.length - 1];
    if (!s || !last) return;
    const first = firstOf(last[0]);
    if (first > s.after) {
      s.after = first;
      s.lastEvent = field(last[1], "end") !== undefined ? Infinity : first + partOf(last[1]).ends.length - 1;
    }
    const waiters = [...s.waiters];
    s.waiters.clear();
    for (const wake of waiters) wake(entries);
  }

  private connect(): Redis {
    const conn = this.main.duplicate({ autoResendUnfulfilledCommands: false });
    conn.on("error", (e: Error) => this.log.warn({ err: e.message }, "redis: the tail connection failed"));
    return conn;
  }

  /** Ends the read in flight unless it names every stream waited on; tried again until it does. */
  private kick(pause: number): void {
    if (this.kicking && pause === 1) return;
    const reading = this.reading;
    if (this.closed || reading === undefined || this.covers(reading)) {
      this.kicking = false;
      return;
    }
    this.kicking = true;
    const again = (wait: number) => setTimeout(() => this.kick(Math.min(wait * 2, MAX_KICK_PAUSE_MS)), wait).unref();
    if (this.id === undefined) return void again(pause);
    this.main.client("UNBLOCK", this.id).then(
      // 1: the read ended, and the loop reads again with every stream; look again all the same.
      (n) => (n === 1 ? setImmediate(() => this.kick(2)) : again(pause)),
      (e: Error) => {
        this.kicking = false;
        this.log.warn({ err: e.message }, "redis: could not wake the tail's read");
      },
    );
  }
}
