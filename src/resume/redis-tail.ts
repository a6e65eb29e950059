import type { Redis } from "ioredis";
import type { Log } from "../log.js";
import type { Entry } from "./redis-entries.js";

/** How long one blocking read waits before it is made again (a kick ends it sooner). */
const BLOCK_MS = 5000;
/** Entries one blocking read returns per stream: enough for a page of a live tail's small parts, never a whole run. */
const COUNT = 16;
/** The longest pause between two tries of a kick that came before its read was blocked. */
const MAX_KICK_PAUSE_MS = 50;

interface Waiter {
  afterSeq: number;
  wake(entries: Entry[]): void;
}

/**
 * The live tail of every run this process's cursors wait on, read on ONE connection (issue 38,
 * item 3: followers share connections; protocol/README.md §16). One `XREAD BLOCK` names every
 * stream a cursor waits on; when entries come, the cursors waiting on that stream are woken with
 * them. A cursor that starts waiting on a stream the read in flight does not name kicks it:
 * `CLIENT UNBLOCK` (on the store's other connection) ends the read at once, and the next names the
 * new stream too.
 *
 * Why this and not pub/sub (a PUBLISH per write, one subscriber connection): it costs the writer
 * nothing. Most runs are never rejoined, and a PUBLISH on every part would be a second command on
 * the stream's path for all of them (B19r); the blocking read costs only while someone waits.
 *
 * A kick can reach Redis before the read it means to end (they go on two connections): UNBLOCK
 * then answers 0, and the kick is tried again, a few milliseconds later, until the read in flight
 * names every waiting stream.
 */
export class Tail {
  private readonly waiting = new Map<string, Set<Waiter>>();
  private conn: Redis | undefined;
  /** The blocking connection's CLIENT ID, for UNBLOCK; stale after its connection failed. */
  private id: number | undefined;
  private stale = true;
  /** The streams the read in flight names; undefined between reads. */
  private reading: Set<string> | undefined;
  private running = false;
  private kicking = false;
  private closed = false;

  constructor(
    private readonly main: Redis,
    private readonly log: Log,
  ) {}

  /** Wakes `wake` with the entries of `key` after event `afterSeq` once there are any; returns the cancel. */
  wait(key: string, afterSeq: number, wake: (entries: Entry[]) => void): () => void {
    const w: Waiter = { afterSeq, wake };
    let set = this.waiting.get(key);
    if (!set) this.waiting.set(key, (set = new Set()));
    set.add(w);
    if (!this.running) void this.run();
    else if (this.reading && !this.reading.has(key)) this.kick(1);
    return () => {
      const s = this.waiting.get(key);
      if (s?.delete(w) && s.size === 0) this.waiting.delete(key);
    };
  }

  close(): void {
    this.closed = true;
    this.waiting.clear();
    this.conn?.disconnect();
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      while (this.waiting.size > 0 && !this.closed) {
        // A connection of its own, opened once, the first time anybody waits: a blocked read holds it.
        // A command left unanswered when it drops fails (no resend), so the next read asks its new id.
        const conn = (this.conn ??= this.connect());
        if (this.stale) {
          this.stale = false;
          conn.client("ID").then(
            (id) => (this.id = id),
            () => (this.stale = true),
          );
        }
        const keys = [...this.waiting.keys()];
        const ids = keys.map((k) => `0-${Math.min(...[...(this.waiting.get(k) as Set<Waiter>)].map((w) => w.afterSeq))}`);
        this.reading = new Set(keys);
        let got: [string, Entry[]][] | null;
        try {
          // The typed command, not `call`: ioredis maps its RESP3 reply back to [[key, entries], ...].
          got = (await conn.xread("COUNT", COUNT, "BLOCK", BLOCK_MS, "STREAMS", ...keys, ...ids)) as [string, Entry[]][] | null;
        } catch (e) {
          if (this.closed) return;
          this.log.warn({ err: (e as Error).message }, "redis: the tail's read failed; reading again");
          this.stale = true;
          this.reading = undefined;
          // The owner check (redis-log.ts) ends the waiting cursors of a run whose writer is gone meanwhile.
          await new Promise((r) => setTimeout(r, 1000).unref());
          continue;
        }
        this.reading = undefined;
        for (const [key, entries] of got ?? []) {
          const set = this.waiting.get(key);
          if (!set) continue;
          this.waiting.delete(key);
          for (const w of set) w.wake(entries);
        }
      }
    } finally {
      this.running = false;
      this.reading = undefined;
    }
  }

  private connect(): Redis {
    const conn = this.main.duplicate({ autoResendUnfulfilledCommands: false });
    conn.on("error", (e: Error) => this.log.warn({ err: e.message }, "redis: the tail connection failed"));
    return conn;
  }

  /** Ends the read in flight if it does not name every waiting stream; tried again until it does. */
  private kick(pause: number): void {
    if (this.kicking && pause === 1) return;
    const reading = this.reading;
    if (this.closed || reading === undefined || [...this.waiting.keys()].every((k) => reading.has(k))) {
      this.kicking = false;
      return;
    }
    this.kicking = true;
    const again = (wait: number) => setTimeout(() => this.kick(Math.min(wait * 2, MAX_KICK_PAUSE_MS)), wait).unref();
    if (this.id === undefined) return void again(pause);
    this.main.client("UNBLOCK", this.id).then(
      // 1: the read ended, and the loop reads again with every stream; check the new one all the same.
      (n) => (n === 1 ? setImmediate(() => this.kick(2)) : again(pause)),
      (e: Error) => {
        this.kicking = false;
        this.log.warn({ err: e.message }, "redis: could not wake the tail's read");
      },
    );
  }
}
