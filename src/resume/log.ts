import type { LoggedEvents } from "./logged.js";

/**
 * The event log of the runs a server streams, after repair (protocol/README.md §16): what a
 * dropped client rejoins from. Two stores keep it, one in the process (memory-log.ts) and one in
 * Redis Streams (redis-log.ts), behind this one interface, so the proxy and the stream methods
 * never know which.
 */

/** What a run's log starts with: who may rejoin it and how its answer began. */
export interface RunStart {
  /** RunAgentInput.threadId; "" when the request named none (or one past MAX_THREAD_ID): such a run is never reloaded. */
  threadId: string;
  /** The agent's path (the request's path without its query): a rejoin names the same, and /connect is beneath it. */
  path: string;
  /** The keyed hash of the starting request's credential (credentials.ts); "" when it presented none (anonymous). */
  credential: string;
  /** The answer's status and end-to-end headers, sent again to every rejoin. */
  status: number;
  headers: Record<string, string>;
  /**
   * For a reload (POST <path>/connect): the SSE blocks that bring a client holding nothing to where
   * this run started (a STATE_SNAPSHOT of the request's state and a MESSAGES_SNAPSHOT of its messages),
   * sent after the run's first event. Unstamped: they are not events of the run. Their bytes count
   * against the run's and the log's caps, as its events do.
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

/**
 * One page of a read: events, or the run's end once every event before it was read. A read never
 * holds more than one page, so a reader that takes its pages slowly holds the process to one page
 * (protocol/README.md §16, back-pressure).
 */
export type Page = { events: LoggedEvents; end?: undefined } | { events?: undefined; end: RunEnd };

/** A reader's place in one run: it pulls the events after it, page by page, then the end. */
export interface Cursor {
  /**
   * The events after the cursor, about `maxBytes` of them (at least one whole event, whatever its
   * size), or the run's end once they were all read. Waits while there is nothing yet. Only one
   * read at a time. After close, a waiting read resolves with `{end: "cancelled"}`.
   */
  read(maxBytes: number): Promise<Page>;
  /** The reader is gone: it no longer counts among the run's readers. Idempotent. */
  close(): void;
}

export interface LogStats {
  runs: number;
  /** Bytes kept for runs in this process: events, preludes and the pages readers hold. */
  bytes: number;
  evicted: number;
}

export interface RunLog {
  /** Opens a run's log. */
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
  /** A cursor after the `afterSeq`-th event (0: before the first); it counts as a reader of the run until closed. */
  open(run: string, afterSeq: number): Promise<Cursor>;
  /** Readers of the run (open cursors), in every process that shares the store. */
  readers(run: string): Promise<number>;
  /** Bytes a reader holds outside the log (a page on its way to a client): counted in stats().bytes and against the total cap; negative to let them go. */
  hold(bytes: number): void;
  /** Sheds runs, least recently used first, until about `bytes` are freed: the heap ceiling's call (runtime/heap-ceiling.ts). Returns the runs dropped. */
  shed(bytes: number): string[];
  stats(): LogStats;
  close(): Promise<void>;
}
