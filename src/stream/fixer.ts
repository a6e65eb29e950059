import type { Operation } from "fast-json-patch";
import { NO_LIMITS, applyNormalized, cloneJson, decodeOp, mark, newDoc, rollback, toWireOp, type ChangeOp, type Doc, type Json, type JsonObject, type Op, type OpError, type Undo } from "../core/index.js";
import { PATCH_KEY, admitSchema, lifecycleFinding } from "./admit.js";
import { EventReader, rewriteSse, type StreamItem } from "./events.js";
import { INHERITS, finding, inherited, patchVerdict, type At, type Finding } from "./findings.js";
import { messageClash } from "./client-model.js";
import { Lifecycle } from "./lifecycle.js";
import type { Summary } from "./checker.js";
import { Messages } from "./messages.js";
import { enforce, opProblem } from "./schema.js";

export type { Finding } from "./findings.js";

export interface FixerOptions {
  /** The state the client holds when the stream starts (default {}). The fixer works on its own copy. */
  state?: JsonObject;
  /** Called for every finding, as `check` words it, in stream order. */
  onFinding?: (f: Finding) => void;
}

type Ev = Record<string, unknown>;

const NORMALIZE = { limits: NO_LIMITS, normalize: true, adopt: false } as const;

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
 * on the client (protocol/README.md §13). Each delta is normalized by the
 * project's core (§5) against a mirror of what the client holds once it has
 * applied the stream written so far: ops that do not fit are dropped, a
 * missing array before an append is inserted, a replace of a missing member
 * becomes an add, `test` ops go. A delta left empty is not sent; nor is an
 * ACTIVITY_DELTA for an activity the client does not have. A delta that
 * needed none of that, and every other event, passes through byte for byte.
 *
 * Each input event is handled as soon as it is complete, and nothing is kept
 * of it afterwards: memory holds the mirror, the client's message ids and
 * the lifecycle's open runs, not the stream.
 */
export class StreamFixer {
  private readonly reader = new EventReader();
  private doc: Doc;
  private readonly messages = new Messages(REMEMBERED);
  /** The mirror of each activity's content, kept with its byte count (core's Doc). */
  private readonly docs = new Map<string, Doc>();
  private readonly lifecycle = new Lifecycle(REMEMBERED);
  private readonly onFinding: ((f: Finding) => void) | undefined;
  /** Findings about events that still go out as they came, and still fail or warn on the client. */
  unfixed = 0;
  /** As `check` counts: events read, deltas among them, and events with a finding of each kind. */
  readonly summary: Summary = { events: 0, deltas: 0, dropped: 0, ignored: 0, fatal: 0 };
  /** The last event each kind was counted for: an event counts once per kind. */
  private readonly counted = { dropped: 0, ignored: 0, fatal: 0 };

  constructor(opts: FixerOptions = {}) {
    this.doc = newDoc(cloneJson(opts.state ?? {}));
    this.onFinding = opts.onFinding;
  }

  /** Bytes of the input stream in; the output text of every event it completes out (possibly ""). */
  push(chunk: Uint8Array | string): string {
    return this.write(this.reader.push(chunk));
  }

  /** End of input: whatever output remains. */
  end(): string {
    return this.write(this.reader.end());
  }

  /**
   * The mirror of what the client holds now: an object, unless the stream's
   * last STATE_SNAPSHOT carried something else (AG-UI allows any JSON there,
   * protocol/README.md §11 does not), which is then returned as it is.
   */
  get state(): JsonObject {
    return this.doc.root as JsonObject;
  }

  get activities(): ReadonlyMap<string, { activityType: string; content: JsonObject }> {
    return this.messages.activities;
  }

  private write(items: StreamItem[]): string {
    let out = "";
    for (const item of items) {
      const text = item.data === undefined ? item.raw : this.event(item, item.data);
      out += this.reader.framing === "sse" ? this.lineFeeds(item, text) : text;
    }
    return out;
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

  private report(f: Finding, unfixed = false): void {
    if (unfixed) this.unfixed++;
    if (this.counted[f.kind] !== f.event) {
      this.counted[f.kind] = f.event;
      this.summary[f.kind]++;
    }
    this.onFinding?.(f);
  }

  private event(item: StreamItem, data: string): string {
    const at: At = { event: ++this.summary.events, line: item.line, type: "" };
    const admitted = admitSchema(data, at);
    const key = PATCH_KEY[at.type];
    if (key !== undefined) this.summary.deltas++;
    if (key !== undefined && admitted.raw !== undefined && Array.isArray(admitted.raw[key]) && (admitted.ok || topLevelFits(admitted.raw, key))) {
      for (const f of admitted.findings) this.report(f);
      return this.delta(item, at, admitted.raw, key, admitted.ok ? admitted.event : undefined, admitted.ok ? admitted.kept : undefined);
    }
    if (!admitted.ok) {
      // A delta whose other members the client refuses cannot be mended without guessing: it goes.
      const dropDelta = key !== undefined && admitted.fatal;
      for (const f of admitted.findings) this.report(f, !dropDelta);
      return dropDelta ? this.empty(item) : item.raw;
    }
    for (const f of admitted.findings) this.report(f);
    const broken = lifecycleFinding(this.lifecycle, admitted.event, at, false);
    if (broken) this.report(broken, true);
    const clash = broken ? undefined : messageClash(this.messages, admitted.event, at);
    if (clash) this.report(clash, true);
    else this.observe(admitted.event);
    return item.raw;
  }

  /** What the client does with an event that is not a delta, kept in the mirror. */
  private observe(event: Ev): void {
    switch (event["type"]) {
      case "STATE_SNAPSHOT":
        this.doc = newDoc(event["snapshot"] as Json);
        return;
      case "ACTIVITY_SNAPSHOT": {
        const id = event["messageId"] as string;
        const content = event["content"] as JsonObject;
        this.messages.snapshot(id, event["activityType"] as string, content, event["replace"] !== false);
        if (this.messages.activity(id)?.content === content) this.docs.set(id, newDoc(content));
        return;
      }
      default:
        this.messages.observe(event);
    }
  }

  /** The mirror of an activity's content, made again if a MESSAGES_SNAPSHOT replaced it. */
  private activityDoc(id: string): Doc | undefined {
    const activity = this.messages.activity(id);
    if (!activity) return undefined;
    let doc = this.docs.get(id);
    if (doc?.root !== activity.content) this.docs.set(id, (doc = newDoc(activity.content)));
    return doc;
  }

  /** `event` is the delta as the client goes on with it, undefined when its schema stage fails; `kept` maps its ops to the input's. */
  private delta(item: StreamItem, at: At, raw: Ev, key: "delta" | "patch", event: Ev | undefined, kept: number[] | undefined): string {
    const ops = raw[key] as unknown[];
    let doc = this.doc;
    if (key === "patch") {
      const id = raw["messageId"] as string;
      const target = this.activityDoc(id);
      if (!target) {
        // The client skips it (unknown id) or warns (another kind of message): either way it goes.
        const lifecycle = event && lifecycleFinding(this.lifecycle, event, at, true);
        const role = this.messages.role(id);
        if (lifecycle) this.report(lifecycle);
        else if (event && role === undefined) this.report(finding(at, "ignored", { code: "UNKNOWN_ACTIVITY", message: `the client has no activity ${JSON.stringify(id)} and skips the delta without a word`, hint: `send an ACTIVITY_SNAPSHOT for ${JSON.stringify(id)} before its deltas (\`fix\` drops this one)` }));
        else if (event) this.report(finding(at, "dropped", { code: "NOT_AN_ACTIVITY", message: `message ${JSON.stringify(id)} is a ${role ?? "non-activity"} message, not an activity: the client warns and skips the delta` }));
        return this.empty(item);
      }
      doc = target;
    }
    // The ops the schema stage lets through, decoded; the others are already reported.
    const valid: { index: number; op: Op }[] = [];
    // When the schema stage kept every op, each one passed it already.
    const passed = event !== undefined && kept === undefined;
    for (let i = 0; i < ops.length; i++) {
      if (!passed && opProblem(ops[i]) !== undefined) continue;
      const d = decodeOp(ops[i]);
      if (d.ok) valid.push({ index: i, op: d.value });
    }
    const before = mark(doc);
    const rootBefore = doc.root;
    const undo: Undo[] = [];
    const { applied, skips } = normalizeInto(doc, valid, undo);
    const same = event !== undefined && valid.length === ops.length && skips.length === 0 && applied.length === valid.length && applied.every((a, k) => a === valid[k]?.op && !(a.op === "replace" && a.path[a.path.length - 1] === "-"));
    const retype = key === "patch" && raw["activityType"] !== this.messages.activity(raw["messageId"] as string)?.activityType;
    const sent = same || applied.length > 0 || retype;
    // verifyEvents reads only the type and the ids, which fixing leaves alone. For a delta the
    // schema refused and nothing is sent of, the client never got that far: nothing to report.
    const lifecycle = event || sent ? lifecycleFinding(this.lifecycle, event ?? raw, at, !sent) : undefined;
    if (lifecycle) this.report(lifecycle, sent);
    else if (event && !same && this.onFinding) {
      // Only a listener needs to know (fix's exit status does not): without one, the verdict is not worked out.
      // Would the delta as sent have applied? The client's own call answers, against the mirror as it was.
      rollback(doc, undo, 0, before);
      const f = verdict(rootBefore, event[key] as Operation[], at, key === "patch", kept);
      if (f) this.report(f);
      normalizeInto(doc, valid, []);
    }
    if (key === "patch" && sent) this.messages.patched(raw["messageId"] as string, { activityType: raw["activityType"] as string, content: doc.root as JsonObject });
    if (same) return item.raw;
    if (!sent) return this.empty(item);
    return this.rewrite(item, { ...raw, [key]: applied.map(toWireOp) });
  }

  /** An event that is not sent: SSE keeps its comments and `id` lines, data-less. */
  private empty(item: StreamItem): string {
    return this.reader.framing === "sse" ? rewriteSse(item.raw, undefined) : "";
  }

  private rewrite(item: StreamItem, event: Ev): string {
    const json = JSON.stringify(event);
    if (this.reader.framing === "sse") return rewriteSse(item.raw, json);
    const end = item.raw.endsWith("\r\n") ? "\r\n" : item.raw.endsWith("\n") ? "\n" : "";
    return (item.raw.startsWith("\uFEFF") ? "\uFEFF" : "") + json + end;
  }
}

/** Normalizes the ops into the document (protocol/README.md §5), logging undo entries. */
function normalizeInto(doc: Doc, valid: readonly { index: number; op: Op }[], undo: Undo[]): { applied: ChangeOp[]; skips: { index: number; error: OpError }[] } {
  const applied: ChangeOp[] = [];
  const skips: { index: number; error: OpError }[] = [];
  for (const { index, op } of valid) {
    const e = applyNormalized(doc, op, NORMALIZE, undo, applied);
    if (e) skips.push({ index, error: e });
  }
  return { applied, skips };
}

/** The finding for a delta the client would drop: fast-json-patch's verdict on it. */
function verdict(root: Json, patch: Operation[], at: At, activity: boolean, kept: number[] | undefined): Finding | undefined {
  const f = patchVerdict(root, patch, (i) => (kept ? (kept[i] as number) : i));
  if (f === INHERITS) return finding(at, activity ? "dropped" : "fatal", inherited(activity));
  return f && finding(at, "dropped", { ...f, message: `${f.message}; ${activity ? "the client warns and keeps the activity as it was" : "the client warns and keeps its state"}` });
}

/** Whether a delta's members other than its patch pass the schema: then its bad ops can go and the rest stay. */
function topLevelFits(raw: Ev, key: "delta" | "patch"): boolean {
  return enforce({ ...raw, [key]: [] }).issues === undefined;
}
