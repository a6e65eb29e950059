import type { LoggedEvents } from "./logged.js";

/**
 * The event log of the runs a server streams, after repair (protocol/README.md §16): what a
 * dropped client rejoins from. Two stores keep it, one in the process (memory-log.ts) and one in
 * Redis Streams (redis-log.ts), behind this one interface, so the proxy and the stream methods
 * never know which.
 */

/** What a run's log starts with: who may rejoin it and how its answer began. */
export interface RunStart {
  threadId: string;
  /** The agent's path (the request's path without its query): a rejoin names the same, and /connect is beneath it. */
  path: string;
  /** The keyed hash of the starting request's credentials (credentials.ts). */
  credential: string;
  /** The answer's status and end-to-end headers, sent again to every rejoin. */
  status: number;
  headers: Record<string, string>;
  /**
   * For a reload (POST <path>/connect): the SSE blocks that bring a client holding nothing to where
   * this run started (a STATE_SNAPSHOT of the request's state and a MESSAGES_SNAPSHOT of its messages),
   * sent after the run's first event. Unstamped: they are not events of the run.
   */
  prelude: string[];
  /** The id of the answer's opening block (`<run>.0.<nonce>`, recorder.ts): a rejoin from it gets every event. */
  opening: string;
}

/** Why a run's log takes no more events: closed sets, worded as the protocol README words them. */
export type RunEnd = "finished" | "cancelled" | "evicted" | "unresumable";

export interface RunInfo extends RunStart {
  run: string;
  /** Events logged so far. */
  events: number;
  ended: RunEnd | undefined;
}

/** Who reads a run from the log: told of the events after its starting point, then of each new one, then of the end. */
export interface Follower {
  events(events: LoggedEvents): void;
  end(reason: RunEnd): void;
}

export interface LogStats {
  runs: number;
  bytes: number;
  evicted: number;
}

export interface RunLog {
  /** Opens a run's log; resolves with its handle. */
  begin(run: string, start: RunStart): Promise<void>;
  /** Adds events in order. Never waits: a store that writes elsewhere queues the write. The store may keep `events.text` as it is. */
  append(run: string, events: LoggedEvents): void;
  /** No more events; the log is kept for the retention from now. */
  end(run: string, reason: RunEnd): void;
  /** The run, if its log is kept. */
  find(run: string): Promise<RunInfo | undefined>;
  /** The id of the event at `seq`, if the log holds it (at 0, the opening block's): a Last-Event-ID must equal it in full. */
  idAt(run: string, seq: number): Promise<string | undefined>;
  /** The thread's latest run started at `path`, if its log is kept. */
  latest(threadId: string, path: string): Promise<string | undefined>;
  /** Reads the events after `afterSeq` (0: all), then follows the run live; resolves with the unsubscribe. */
  follow(run: string, afterSeq: number, follower: Follower): Promise<() => void>;
  /** Readers following the run, in every process that shares the store. */
  readers(run: string): Promise<number>;
  stats(): LogStats;
  close(): Promise<void>;
}
