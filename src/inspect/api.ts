/**
 * The inspector's JSON API (protocol/README.md §15) as types: what store.ts
 * serves and the page (page/main.ts) reads, written once. It imports
 * nothing, so that the page, compiled with the DOM's libraries and no Node
 * types, can import it too. `J` is the type of a JSON value: the core's
 * (whole floats are IntegralFloat) in the store, plain JSON in the page,
 * which reads what the store's encoder wrote. The closed sets are the
 * pipeline's (stream/findings.ts); store.ts fails to compile if they part.
 */

export type Outcome = "passed" | "mended" | "discarded" | "kept";
/**
 * What went to the client for a whole event, in the outcomes' words:
 * `passed` (as sent), `mended` (rewritten: `forwarded` is what went) or
 * `discarded` (nothing). `kept` is about a client's value, never an event.
 */
export type Delivery = Exclude<Outcome, "kept">;
export type Kind = "dropped" | "ignored" | "fatal" | "wiped";
export type Status = "open" | "complete" | "broken";

export type PlainJson = null | boolean | number | string | PlainJson[] | { [key: string]: PlainJson };

export interface Caps {
  /** The last N streams. */
  streams: number;
  /** The last M events of each stream. */
  events: number;
  /** Bytes of text kept per stream (events as sent and forwarded, findings, states after). */
  bytes: number;
}

/**
 * A finding as the API carries it: stream/findings.ts's Finding, or, without
 * `kind`, a repair's finding about an op the client would have applied as
 * sent, which it sent rewritten or left out all the same (§13: `REWRITTEN`,
 * `NOTHING_MOVED`, ...).
 */
export interface FindingView {
  event: number;
  line: number;
  kind?: Kind;
  type: string;
  index?: number;
  pointer?: string;
  code: string;
  message: string;
  hint?: string;
  outcome: Outcome;
}

export interface StreamSummary {
  id: string;
  threadId: string | null;
  runId: string | null;
  method: string;
  path: string;
  started: string;
  status: Status;
  /** Events seen, kept or not. */
  seen: number;
  evicted: number;
  bytes: number;
  outcomes: Record<Outcome, number>;
  kinds: Record<Kind, number>;
}

export interface EventView<J = PlainJson> {
  n: number;
  type: string;
  /** Milliseconds from the stream's start to the event, as the proxy read it; absent in check --html's report, where the time a file was read says nothing. */
  ms?: number;
  bytes: number;
  outcomes: Record<Outcome, number>;
  findings: readonly FindingView[];
  delivery: Delivery;
  sent?: J;
  sentText?: string;
  forwarded?: J;
  state?: J;
  elided?: true;
}

export interface StreamDetail<J = PlainJson> extends StreamSummary {
  caps: Caps;
  baseline: J;
  events: EventView<J>[];
}

export interface StreamList {
  caps: Caps;
  dropped: number;
  streams: StreamSummary[];
}

/** The input `check --html` read: its name (`(stdin)` for `-`) and its size in bytes. */
export interface ReportFile {
  name: string;
  bytes: number;
}

/** `check --html`'s data, embedded in its page: the file, the list and each stream's detail. */
export interface Report<J = PlainJson> {
  file: ReportFile;
  list: StreamList;
  streams: Record<string, StreamDetail<J>>;
}
