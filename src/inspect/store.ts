import { isObject, type Json } from "../core/index.js";
import { hasKind, type Finding, type Kind as PipelineKind, type Outcome as PipelineOutcome, type Reported } from "../stream/findings.js";
import type { Observed } from "../stream/fixer.js";
import type { Caps, Delivery, EventView as ApiEventView, FindingView, Kind, Outcome, Status, StreamDetail as ApiStreamDetail, StreamList, StreamSummary } from "./api.js";

export type { Caps, Status, StreamList, StreamSummary } from "./api.js";
export type EventView = ApiEventView<Json>;
export type StreamDetail = ApiStreamDetail<Json>;

/** The API's closed sets and finding shape are the pipeline's: this fails to compile if they part. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;
export type ApiIsThePipelines = Holds<[Same<Outcome, PipelineOutcome>, Same<Kind, PipelineKind>, Same<Required<FindingView>, Required<Finding>>] extends [true, true, true] ? true : false>;

/**
 * What the inspector remembers (issue 25): the last streams the proxy fixed,
 * each with its last events, in memory only. Every bound is a flag of
 * `proxy --inspect`; past one, the oldest goes first and the page says how
 * many went. Nothing is written to disk.
 *
 * It is fed by the pipeline's observer hook (StreamFixer's `onEvent`, or
 * StreamChecker's for `check --html`), never by a model of its own: what it
 * shows is what the pipeline decided.
 */

export const DEFAULT_CAPS: Caps = { streams: 20, events: 2_000, bytes: 16 * 1024 * 1024 };

/** What a stream's record costs beyond its text: the objects that hold it, counted so that a stream of tiny events is bounded too. */
const RECORD_OVERHEAD = 256;


interface EventRecord {
  n: number;
  /** undefined: the stream is not timed (check --html). */
  ms: number | undefined;
  /** The event's data as sent; undefined when the record alone passed the byte cap (elided). */
  sent: string | undefined;
  /** undefined: went as sent; null: not sent; else the text sent in its place. */
  out: string | null | undefined;
  findings: readonly Reported[];
  /** The state after the event as JSON text: the same string as the event before's when the event did not change it. */
  state: string | undefined;
  /** The bytes this record accounts for, its state's text aside. */
  cost: number;
  /** Its state's bytes, when it is the first kept record to hold that text; else 0. */
  stateCost: number;
  elided: boolean;
  /** An elided event's size, as sent (the others' is worked out from `sent` when asked for). */
  size?: number;
}

export interface StreamMeta {
  method: string;
  path: string;
}

/** Counts by outcome and by kind. */
export interface Counts {
  outcomes: Record<Outcome, number>;
  kinds: Record<Kind, number>;
}

const zeroCounts = (): Counts => ({ outcomes: { passed: 0, mended: 0, discarded: 0, kept: 0 }, kinds: { dropped: 0, ignored: 0, fatal: 0, wiped: 0 } });

/** One stream as the inspector keeps it; `observe` is the pipeline's hook. */
export class StreamRecord {
  readonly started = Date.now();
  threadId: string | undefined;
  runId: string | undefined;
  status: Status = "open";
  /** Events seen, kept or not. */
  seen = 0;
  /** Events that went, oldest first, to stay within the caps. */
  evicted = 0;
  bytes = 0;
  readonly counts = zeroCounts();
  /** Before `head`, emptied slots: an evicted record is let go at once, the array compacted now and then (trim). */
  private events: (EventRecord | undefined)[] = [];
  private head = 0;
  private lastState: string;
  /** Whether the stream was dropped from the inspector to make room: it records nothing more. */
  detached = false;

  constructor(
    readonly id: string,
    readonly meta: StreamMeta,
    /** The state the client held before the first event, as JSON text. */
    readonly baseline: string,
    private readonly caps: Caps,
    private readonly changed: (s: StreamRecord) => void,
    /** Whether each event's time since the start is worth keeping: for a live stream, not for a file. */
    private readonly timed = true,
  ) {
    this.lastState = baseline;
  }

  /** The pipeline's observer: one event, after the pipeline decided on it. */
  readonly observe = (e: Observed): void => {
    if (this.detached) return;
    const n = ++this.seen;
    for (const f of e.findings) {
      this.counts.outcomes[f.outcome]++;
      if (hasKind(f)) this.counts.kinds[f.kind]++;
    }
    // The ids of the stream's first run, read from RUN_STARTED only: parsing every event again would double the proxy's work.
    if (this.runId === undefined && e.data.includes("RUN_STARTED")) this.ids(e.data);
    const sent = own(e.data);
    let cost = RECORD_OVERHEAD + sent.length;
    let stateCost = 0;
    // Only a state event (its type spelled out, or written with escapes) can change the state, and not one that was not sent.
    if (e.out !== null && (e.data.includes("STATE") || e.data.includes("\\u"))) {
      const text = JSON.stringify(e.state) ?? "null";
      if (text !== this.lastState) {
        this.lastState = text;
        stateCost = text.length;
      }
    }
    const out = e.out === undefined || e.out === null ? e.out : JSON.stringify(e.out);
    if (typeof out === "string") cost += out.length;
    if (e.findings.length > 0) cost += JSON.stringify(e.findings).length;
    const record: EventRecord = { n, ms: this.timed ? Date.now() - this.started : undefined, sent, out, findings: e.findings, state: this.lastState, cost, stateCost, elided: false };
    // An event that alone passes the cap keeps its place in the timeline, without its text.
    if (cost + stateCost > this.caps.bytes) {
      Object.assign(record, { sent: undefined, out: undefined, state: undefined, cost: RECORD_OVERHEAD, stateCost: 0, elided: true, size: Buffer.byteLength(e.data) });
      // Its state is not kept either, nor shown after the events that follow until a state event writes it out again.
      if (stateCost > 0) this.lastState = "";
    }
    this.events.push(record);
    this.bytes += record.cost + record.stateCost;
    this.trim();
    this.changed(this);
  };

  /** The stream ended: whole (`complete`) or cut off (`broken`). */
  close(complete: boolean): void {
    if (this.status !== "open") return;
    this.status = complete ? "complete" : "broken";
    if (!this.detached) this.changed(this);
  }

  /** Oldest first, until both caps hold. */
  private trim(): void {
    while (this.events.length - this.head > 1 && (this.events.length - this.head > this.caps.events || this.bytes > this.caps.bytes)) {
      const gone = this.events[this.head] as EventRecord;
      this.events[this.head++] = undefined;
      const next = this.events[this.head] as EventRecord;
      // A state text the next event shares stays in memory: its cost moves with it.
      if (gone.stateCost > 0 && next.state === gone.state) {
        next.stateCost = gone.stateCost;
        this.bytes -= gone.cost;
      } else this.bytes -= gone.cost + gone.stateCost;
      this.evicted++;
    }
    if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events = this.events.slice(this.head);
      this.head = 0;
    }
  }

  private ids(data: string): void {
    try {
      const e = JSON.parse(data) as Record<string, unknown>;
      if (e["type"] !== "RUN_STARTED") return;
      if (typeof e["threadId"] === "string") this.threadId = e["threadId"];
      if (typeof e["runId"] === "string") this.runId = e["runId"];
    } catch {
      // Not JSON: the pipeline has its finding; the ids stay unknown.
    }
  }

  /** The stream's line in GET /api/streams (protocol/README.md, "The inspector"). */
  summary(): StreamSummary {
    return {
      id: this.id,
      threadId: this.threadId ?? null,
      runId: this.runId ?? null,
      method: this.meta.method,
      path: this.meta.path,
      started: new Date(this.started).toISOString(),
      status: this.status,
      seen: this.seen,
      evicted: this.evicted,
      bytes: this.bytes,
      outcomes: { ...this.counts.outcomes },
      kinds: { ...this.counts.kinds },
    };
  }

  /** GET /api/streams/:id: the summary, and the events kept with a number above `after`: the last `limit` of them, when given. */
  detail(after = 0, limit = Infinity): StreamDetail {
    const events: EventView[] = [];
    let from = this.head;
    while (from < this.events.length && (this.events[from] as EventRecord).n <= after) from++;
    from = Math.max(from, this.events.length - limit);
    for (let i = from; i < this.events.length; i++) events.push(view(this.events[i] as EventRecord));
    return { ...this.summary(), caps: { ...this.caps }, baseline: parse(this.baseline).value, events };
  }
}

function view(r: EventRecord): EventView {
  const outcomes: Record<Outcome, number> = { passed: 0, mended: 0, discarded: 0, kept: 0 };
  for (const f of r.findings) outcomes[f.outcome]++;
  // In the outcomes' words (§13): nothing sent is discarded, the event as sent passed, another in its place mended.
  const delivery: Delivery = r.out === null ? "discarded" : r.out === undefined ? "passed" : "mended";
  const ms = r.ms === undefined ? {} : { ms: r.ms };
  if (r.elided) return { n: r.n, type: "", ...ms, bytes: r.size ?? 0, outcomes, findings: r.findings, delivery, elided: true };
  // Parsed here, when someone asks, not on the proxy's path.
  const data = r.sent as string;
  const sent = parse(data);
  const type = sent.ok && isObject(sent.value) && typeof sent.value["type"] === "string" ? sent.value["type"] : (r.findings[0]?.type ?? "");
  // Its size in UTF-8, worked out when asked for, not on the proxy's path.
  const v: EventView = { n: r.n, type, ...ms, bytes: Buffer.byteLength(data), outcomes, findings: r.findings, delivery };
  if (sent.ok) v.sent = sent.value;
  else v.sentText = data;
  if (typeof r.out === "string") v.forwarded = parse(r.out).value;
  // "": the state went with an elided event before it.
  if (r.state) v.state = parse(r.state).value;
  return v;
}

/**
 * A string of its own. The reader's is a slice of the whole chunk it came in
 * (V8 keeps the chunk alive for a slice of it), so keeping it would keep
 * every chunk. Slicing a concatenation makes V8 flatten it first: the slice
 * that comes out holds only a copy of this string, one character longer.
 * (JSON's round trip copies too, at several times the cost per event.)
 */
const own = (s: string): string => (" " + s).slice(1);


function parse(text: string): { ok: boolean; value: Json } {
  try {
    return { ok: true, value: JSON.parse(text) as Json };
  } catch {
    return { ok: false, value: null };
  }
}

/** Every stream the inspector keeps, newest last, and who to tell when one changes. */
export class Inspector {
  private readonly streams: StreamRecord[] = [];
  private next = 1;
  /** Streams dropped, oldest first, to stay within the cap. */
  dropped = 0;
  private readonly listeners = new Set<(s: StreamRecord) => void>();

  /** `timed`: false for a stream read from a file (check --html), whose events carry no time of their own as it reads them. */
  constructor(
    readonly caps: Caps = DEFAULT_CAPS,
    private readonly timed = true,
  ) {}

  /** A new stream, with the state the client held before it. */
  open(meta: StreamMeta, baseline: Json): StreamRecord {
    const s = new StreamRecord(String(this.next++), meta, JSON.stringify(baseline) ?? "null", this.caps, this.notify, this.timed);
    this.streams.push(s);
    while (this.streams.length > this.caps.streams) {
      (this.streams.shift() as StreamRecord).detached = true;
      this.dropped++;
    }
    this.notify(s);
    return s;
  }

  get(id: string): StreamRecord | undefined {
    return this.streams.find((s) => s.id === id);
  }

  /** GET /api/streams: newest first. */
  list(): StreamList {
    return { caps: { ...this.caps }, dropped: this.dropped, streams: this.streams.map((s) => s.summary()).reverse() };
  }

  /** Called on every change while someone listens (the page's live feed); returns the way to stop. */
  listen(fn: (s: StreamRecord) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private readonly notify = (s: StreamRecord): void => {
    // Nobody listening (no page open): not even an iterator per event.
    if (this.listeners.size > 0) for (const fn of this.listeners) fn(s);
  };
}

