import type { Json, JsonObject } from "../core/index.js";
import { Client, PASSTHROUGH, type Mend, type Policy, type RunIds, type Summary } from "./client.js";
import { EventReader, rewriteSse, type Framing, type StreamItem } from "./events.js";
import { TEXT, type Outcome, type Reported } from "./findings.js";
import type { Activity } from "./messages.js";

export type { Finding, Reported } from "./findings.js";
export type { Policy } from "./client.js";

export interface FixerOptions {
  /**
   * The state the client holds when the stream starts: the baseline. The
   * fixer works on its own copy. Left out, it is not known: the mirror
   * starts at {}, and the first snapshot sent whole is
   * SNAPSHOT_REPLACES_UNKNOWN (§13).
   */
  state?: JsonObject;
  /**
   * The client may hold more than `state`: it has taken events the baseline does not hold (a stream
   * opened again on a new sidecar without its replay, §14). The mirror starts at `state` all the
   * same, but is not known to be the client's: under --own, each run's first owned write resynchronizes.
   */
  resync?: boolean;
  /** The apply stage's repair policy: --own, --snapshots, --join-keys (default: none of them). */
  policy?: Policy;
  /** Called for every finding, with its outcome, in stream order. */
  onFinding?: (f: Reported) => void;
  /** Called once per event, after it went through the pipeline (an inspector's hook; absent, it costs nothing). */
  onEvent?: (e: Observed) => void;
  /** The stream's framing when the caller knows it (the stream methods, from a Content-Type); default: told from the first line. */
  framing?: Framing;
  /** The request's thread and run ids, for a RUN_STARTED the lifecycle repair sends (default "agui-state"). */
  run?: RunIds;
}

/** One event as an observer sees it once the pipeline is done with it. */
export interface Observed {
  /** The event's data, as the server sent it. */
  data: string;
  /** What went to the client: undefined, the event as sent; null, nothing; else the event sent in its place. */
  out: JsonObject | null | undefined;
  /** The event's findings, each with its outcome; one about an op the client would have applied as sent has no kind. */
  findings: readonly Reported[];
  /** What the client holds after the event: borrowed and live, so read or copy it before the next one. */
  state: Json;
}

/**
 * How many ids of messages other than activities (and owners of each kind in
 * a run) fix remembers, so memory stays flat however long the stream: an
 * event about an older one is read as about a message the client does not
 * have. Activities, the state and open messages are all kept.
 */
export const REMEMBERED = 10_000;

/**
 * `agui-state fix` as a stream transformer: bytes of an AG-UI event stream in,
 * the same stream out with every STATE_DELTA and ACTIVITY_DELTA made to apply
 * on the client (protocol/README.md §13): the client model of client.ts with
 * a repair policy at its apply stage. A delta that needed no mending, and
 * every other event, passes through byte for byte; a delta left empty is not
 * sent.
 *
 * Each input event is handled as soon as it is complete, and nothing is kept
 * of it afterwards: memory holds the mirror, the client's message ids and
 * the lifecycle's open runs, not the stream, and of an unfinished event no
 * more than CLIENT_SSE_LIMIT (past it, the rest passes on as it comes).
 */
export class StreamFixer {
  private readonly reader = new EventReader();
  private readonly client: Client;
  private readonly onFinding: ((f: Reported) => void) | undefined;
  private readonly onEvent: ((e: Observed) => void) | undefined;

  constructor(opts: FixerOptions = {}) {
    // Without a listener the findings are not read: the verdict on each mended delta is not worked out.
    this.client = new Client({ state: opts.state ?? {}, known: opts.state !== undefined, resync: opts.resync === true, repair: opts.policy ?? PASSTHROUGH, remember: REMEMBERED, diagnose: opts.onFinding !== undefined || opts.onEvent !== undefined, ...(opts.run ? { run: opts.run } : {}) });
    this.onFinding = opts.onFinding;
    this.onEvent = opts.onEvent;
    // Set before the first chunk, it stands in for the reader's detection.
    if (opts.framing !== undefined) this.reader.framing = opts.framing;
  }

  /** Bytes of the input stream in; the output text of every event it completes out (possibly ""). */
  push(chunk: Uint8Array | string): string {
    return this.write(this.reader.push(chunk));
  }

  /** End of input: whatever output remains, and what the lifecycle repair ends the stream with. */
  end(): string {
    return this.write(this.reader.end()) + this.ending();
  }

  /**
   * As `push`, with the output of each item read apart (for SSE, one block each, but for the text of
   * an item past the client's limit): what a stamper gives ids to without finding the blocks again
   * (resume/stamp.ts).
   */
  pushEach(chunk: Uint8Array | string): string[] {
    return this.writeEach(this.reader.push(chunk));
  }

  /** As `end`, item by item. */
  endEach(): string[] {
    const out = this.writeEach(this.reader.end());
    const last = this.ending();
    if (last !== "") out.push(last);
    return out;
  }

  /** A RUN_FINISHED held back, as it goes out (lifecycle-repair.ts): sent when the answer ends, or a new run starts. */
  private held: string | undefined;
  /** The current event's mend, applied once its text is made. */
  private mend: Mend | undefined;

  /** Set once the end of the input found a run going on and the lifecycle repair ended it (RUN_ERROR INCOMPLETE_STREAM). */
  runEnded = false;

  /** The stream ended: the held RUN_FINISHED, or a cut run's closes and RUN_ERROR (protocol/README.md §13). */
  private ending(): string {
    if (this.passing) return this.takeHeld();
    const m = this.client.end(this.reader.line);
    if (m !== undefined && m.findings.length > 0) {
      this.runEnded = true;
      if (this.onFinding) for (const f of m.findings) this.onFinding(f);
    }
    return m === undefined ? this.takeHeld() : this.compose(m, "");
  }

  private takeHeld(): string {
    const h = this.held ?? "";
    this.held = undefined;
    return h;
  }

  /** An event's text with the lifecycle repair's mend around it: what goes before it, the held end, or the event held. */
  private compose(m: Mend, text: string): string {
    let out = "";
    for (const e of m.before) out += this.reader.framing === "ndjson" ? `${JSON.stringify(e)}\n` : `data: ${JSON.stringify(e)}\n\n`;
    if (m.release) out += this.takeHeld();
    if (m.forget) this.held = undefined;
    if (!m.hold) return out + text;
    this.held = text;
    return out;
  }

  /**
   * The mirror of what the client holds now: an object, unless the stream's
   * last STATE_SNAPSHOT carried something else (AG-UI allows any JSON there,
   * protocol/README.md §11 does not), which is then returned as it is.
   */
  get state(): JsonObject {
    return this.client.state as JsonObject;
  }

  get activities(): ReadonlyMap<string, Activity> {
    return this.client.activities;
  }

  /**
   * What the fixer holds, approximately: the mirror's state and activities
   * as JSON bytes, and the unfinished event's text (UTF-16 code units, two
   * bytes each). What a heap ceiling weighs a stream by.
   */
  get bytes(): number {
    return this.client.bytes + 2 * this.reader.held;
  }

  /** The unfinished event's text, not yet answered for: what a middleware fails open with (protocol/README.md §14, `pending`). */
  get pendingText(): string {
    return this.passing ? "" : this.reader.heldText;
  }

  /**
   * The input from its start up to and including its first event, once that event came, when it is
   * a RUN_STARTED (protocol/README.md §14, `head`: what a middleware keeps to feed a new sidecar);
   * "" when it is not, undefined until it came.
   */
  get headText(): string | undefined {
    return this.head.done ? this.head.text : undefined;
  }

  private readonly head = { text: "", done: false };

  /** Findings about events that still go out as they came, and still fail or warn on the client. */
  get unfixed(): number {
    return this.client.unfixed;
  }

  /** As `check` counts: events read, deltas among them, and events with a finding of each kind. */
  get summary(): Summary {
    return this.client.summary;
  }

  /** The findings by what fix did with them. */
  get outcomes(): Readonly<Record<Outcome, number>> {
    return this.client.outcomes;
  }

  /** Set once the reader passed CLIENT_SSE_LIMIT: the rest of the stream goes out as it came. */
  private passing = false;

  private write(items: StreamItem[]): string {
    let out = "";
    for (const item of items) out += this.output(item);
    return out;
  }

  private writeEach(items: StreamItem[]): string[] {
    const out: string[] = [];
    for (const item of items) {
      const text = this.output(item);
      if (text !== "") out.push(text);
    }
    return out;
  }

  /** One item's output text. */
  private output(item: StreamItem): string {
    const text = this.outputOf(item);
    if (!this.head.done) this.heading(item);
    return text;
  }

  private outputOf(item: StreamItem): string {
    if (this.passing || item.overflow) {
      if (item.overflow) this.overflow(item);
      return this.takeHeld() + item.raw;
    }
    const text = item.data === undefined ? item.raw : this.event(item, item.data);
    const out = this.reader.framing === "sse" ? this.lineFeeds(item, text) : text;
    const m = this.mend;
    if (m === undefined) return out;
    this.mend = undefined;
    return this.compose(m, out);
  }

  /** Keeps the input's first items until its first event: the stream's head, when that event is a RUN_STARTED. */
  private heading(item: StreamItem): void {
    this.head.text += item.raw;
    if (item.overflow) Object.assign(this.head, { text: "", done: true });
    else if (item.data !== undefined) {
      Object.assign(this.head, { text: this.client.firstType === "RUN_STARTED" ? this.head.text : "", done: true });
    }
  }

  /** The last SSE item read ended with a CR: the reader passes the LF of its CRLF, when it comes late, as an item of its own. */
  private crEnded = false;

  /**
   * SSE text with every line ended by LF alone. @ag-ui/client 1.0.0 splits
   * events only at "\n\n", so a stream framed with CRLF (or CR) reaches it as
   * one block and fails its run (protocol/README.md §13). A CR is always a
   * line end in SSE, never data, so this changes the framing only; a stream
   * without CRs passes byte for byte.
   */
  private lineFeeds(item: StreamItem, text: string): string {
    const late = this.crEnded && item.raw === "\n";
    this.crEnded = item.raw.charCodeAt(item.raw.length - 1) === 13;
    if (late) return "";
    return text.indexOf("\r") === -1 ? text : text.replace(/\r\n?/g, "\n");
  }

  private event(item: StreamItem, data: string): string {
    const step = this.client.feed(data, item.line);
    this.mend = step.mend;
    // Most events have no findings: the loop is not entered, nor its iterator made, for them.
    if (this.onFinding && step.findings.length > 0) for (const f of step.findings) this.onFinding(f);
    // The observer (the inspector) reads every finding, those without a kind (§13: REWRITTEN, NOTHING_MOVED) too.
    if (this.onEvent) this.onEvent({ data, out: step.out, findings: step.findings, state: this.client.state });
    if (step.out === undefined) return item.raw;
    return step.out === null ? this.empty(item) : this.rewrite(item, step.out);
  }

  /**
   * An event longer than the client accepts (CLIENT_SSE_LIMIT): its run
   * fails whatever is sent, so the fixer stops reading and holds nothing
   * more; its text and the rest of the stream pass on unchanged.
   */
  private overflow(item: StreamItem): void {
    this.passing = true;
    const f = this.client.overflow(item.line, TEXT.bufferLimit("fix", false));
    if (f && this.onFinding) this.onFinding(f);
  }

  /** An event that is not sent: SSE keeps its comments and `id` lines, data-less. */
  private empty(item: StreamItem): string {
    return this.reader.framing === "sse" ? rewriteSse(item.raw, undefined) : "";
  }

  private rewrite(item: StreamItem, event: JsonObject): string {
    const json = JSON.stringify(event);
    if (this.reader.framing === "sse") return rewriteSse(item.raw, json);
    const end = item.raw.endsWith("\r\n") ? "\r\n" : item.raw.endsWith("\n") ? "\n" : "";
    return (item.raw.startsWith("\uFEFF") ? "\uFEFF" : "") + json + end;
  }
}
