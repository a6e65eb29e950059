import { EventType, type ActivityDeltaEvent, type Event as AguiEvent, type StateSnapshotEvent } from "@ag-ui/core";
import { decodeOp, isObject, toWireOp, type ChangeOp, type Json, type JsonObject, type Path } from "../core/index.js";
import { SNAPSHOT_TEXT, TEXT, applies, finding, stopsHere, type At, type Finding, type Reader, type Reported } from "./findings.js";
import type { Lifecycle } from "./lifecycle.js";
import { LifecycleRepair, type Mend, type RunIds } from "./lifecycle-repair.js";
import type { Messages } from "./messages.js";
import { Mirror, type Changed, type Indexed, type NormalizeOptions, type Normalized } from "./mirror.js";
import { opProblem } from "./schema.js";
import { ownedOps, snapshotDelta, unowned } from "./snapshots.js";
import { enforceStage, topLevelShell, verifyStage, type Decision, type Enforced, type PatchKey } from "./stages.js";
import { NONE, type Tally } from "./tally.js";
import type { Untouched } from "./untouched.js";
import { messageClash, verdicts } from "./verdicts.js";

/**
 * The apply stage with a repair policy (`fix`, `proxy`, the RPC stream
 * methods): what the client should be sent instead of each event. Each
 * delta is normalized against a mirror of what the client holds (mirror.ts),
 * and each snapshot is written as the policy says (snapshots.ts,
 * protocol/README.md §13).
 */

/** The repair policy of the apply stage (protocol/README.md §13). */
export interface Policy {
  /** The members the server owns (--own): a snapshot replaces only these. */
  own: readonly Path[];
  /** `delta`: a snapshot goes as the minimal STATE_DELTA (--snapshots). */
  snapshots: "pass" | "delta";
  /** Read an unescaped key's segments as one member name (--join-keys). */
  joinKeys: boolean;
  /** repair: runs the client would reject are mended (--lifecycle, protocol/README.md §13); pass (the default): sent as they come. */
  lifecycle?: "repair" | "pass";
}

export const PASSTHROUGH: Policy = { own: [], snapshots: "pass", joinKeys: false, lifecycle: "pass" };

/** What became of one event: `out` undefined sends it as it came, null sends nothing, an object is sent in its place. */
export interface Step {
  decision: Decision;
  /** Its findings; a repair's may include some without a kind (Applies). */
  findings: readonly Reported[];
  out: JsonObject | null | undefined;
  /** Lifecycle repair (lifecycle-repair.ts): events sent before this one, the held RUN_FINISHED sent or forgotten, this one held. */
  mend?: Mend;
}

/** The step of an event that goes on as it came, with nothing to say. */
export const PASSED: Step = Object.freeze({ decision: "pass", findings: NONE, out: undefined });

/** What the repairing apply stage shares with the rest of the client model. */
export interface Shared {
  readonly messages: Messages;
  readonly lifecycle: Lifecycle;
  readonly tally: Tally;
  readonly untouched: Untouched;
  readonly reader: Reader;
}

export class RepairApply {
  /** The mirror of the state; each activity's content has its own. */
  readonly mirror: Mirror;
  private readonly docs = new Map<string, Mirror>();
  /**
   * --own: whether the mirror is known to be what the client holds, so a snapshot is diffed against it.
   * When the baseline is known (the request's RunAgentInput.state, `--state`), it always is: the mirror
   * started there and follows every event sent (issue 41). When it is not, each run's first owned
   * write is one `add` of each owned member, whole (the resynchronizing add), and this turns true then.
   */
  private resynced: boolean;
  /** How a delta is normalized: kept as it comes out, or (a delta whose verdict is worked out) kept only when it applied as sent. */
  private readonly keepAll: NormalizeOptions;
  private readonly keepAsSent: NormalizeOptions;

  constructor(
    /** The baseline, the mirror's own copy. */
    state: Json,
    private readonly policy: Policy,
    private readonly shared: Shared,
    /** Work out the client's verdict on each delta mended (ClientOptions.diagnose). */
    private readonly diagnose: boolean,
    /** The ids a RUN_STARTED the lifecycle repair sends carries (the request's). */
    run: RunIds = { threadId: "agui-state", runId: "agui-state" },
    remember = Infinity,
    /** Whether `state` is what the client holds (the request's, `--state`), rather than {} standing in for it. */
    private readonly known = false,
  ) {
    this.resynced = known;
    this.lifecycle = policy.lifecycle !== "repair" ? undefined : new LifecycleRepair(shared.lifecycle, shared.messages, shared.tally, run, remember);
    this.mirror = new Mirror(state);
    this.keepAll = { joinKeys: policy.joinKeys, keep: "all" };
    this.keepAsSent = { joinKeys: policy.joinKeys, keep: "as-sent" };
  }

  /** The lifecycle repair, unless --lifecycle pass. */
  private readonly lifecycle: LifecycleRepair | undefined;

  /** The stream ended: what the lifecycle repair sends last (a held RUN_FINISHED, or a cut run's end). */
  end(at: At): Mend | undefined {
    return this.lifecycle?.end(at);
  }

  /** One event that passed the transport; `key` is its patch member when it is a delta. */
  step(raw: JsonObject, at: At, key: PatchKey | undefined): Step {
    const e = enforceStage(raw, at);
    if (this.lifecycle === undefined || (e.decision !== "pass" && e.decision !== "strip")) return this.applied(raw, at, key, e);
    const mend = this.lifecycle.mend(e.event, at);
    if (mend.drop) return { decision: "drop", findings: mend.findings, out: null, mend };
    // A held RUN_FINISHED is not shown to the lifecycle yet: the client takes it when it is sent.
    const step = mend.hold ? { decision: "pass" as const, findings: NONE, out: undefined } : this.applied(raw, at, key, e);
    return { ...step, findings: mend.findings.length === 0 ? step.findings : [...mend.findings, ...step.findings], mend };
  }

  /** The event through the apply stage, as before lifecycle repair. */
  private applied(raw: JsonObject, at: At, key: PatchKey | undefined, e: Enforced): Step {
    const { tally } = this.shared;
    const ops = key === undefined ? undefined : raw[key];
    if (key !== undefined && Array.isArray(ops)) {
      const ok = e.decision === "pass" || e.decision === "strip";
      // A delta the schema refuses only for some of its ops: those go, and the rest is mended.
      const shell = ok ? e.event : e.decision === "fatal" ? topLevelShell(raw, key) : undefined;
      if (shell !== undefined) {
        const findings = tally.with(e.findings, "discarded");
        const step = this.delta(raw, ops, at, key, ok ? e.event : undefined, shell, ok ? e.kept : undefined);
        return findings.length === 0 ? step : { ...step, findings: [...findings, ...step.findings] };
      }
    }
    if (e.decision === "drop" || e.decision === "fatal") {
      // A delta whose other members the client refuses cannot be mended without guessing: it goes.
      if (key !== undefined && e.decision === "fatal") return { decision: "drop", findings: tally.with(e.findings, "discarded"), out: null };
      return { decision: e.decision, findings: tally.with(e.findings, "passed"), out: undefined };
    }
    // §11, §13: a snapshot that is not an object is left out, whatever the policy: the client keeps the object it holds.
    if (e.event.type === EventType.STATE_SNAPSHOT && !isObject(e.event.snapshot)) return this.notObject(e.event, at);
    if (e.event.type === EventType.STATE_SNAPSHOT && (this.policy.own.length > 0 || this.policy.snapshots === "delta")) {
      const step = this.snapshot(e.event, at);
      if (step) return step;
    }
    const verified = verifyStage(this.shared.lifecycle, e.event, at, "feed");
    const clash = verified.decision === "fatal" ? undefined : messageClash(this.shared.messages, e.event, at);
    const seen = clash ? NONE : this.observe(e.event, at);
    if (verified.decision === "pass" && !clash) return seen.length === 0 ? PASSED : { decision: "wipe", findings: seen, out: undefined };
    const refused = verified.decision === "fatal" ? verified.findings[0] : clash;
    return { decision: verified.decision === "fatal" ? "fatal" : "drop", findings: refused ? [tally.count(refused), ...seen] : seen, out: undefined };
  }

  /** What the client does with an event that is not a delta, kept in the mirror. */
  private observe(event: AguiEvent, at: At): readonly Finding[] {
    const { messages, tally } = this.shared;
    switch (event.type) {
      case EventType.STATE_SNAPSHOT: {
        const snapshot: Json = event.snapshot;
        const { untouched, reader } = this.shared;
        const unknown = untouched.replaced(at, reader, "passed");
        const lost = untouched.wiped(this.mirror.root, snapshot, at, "passed");
        this.mirror.reset(snapshot);
        if (unknown) lost.unshift(unknown);
        return lost.map((f) => tally.count(f));
      }
      case EventType.ACTIVITY_SNAPSHOT: {
        const content: JsonObject = event.content;
        messages.snapshot(event.messageId, event.activityType, content, event.replace !== false);
        if (messages.activity(event.messageId)?.content === content) this.docs.set(event.messageId, new Mirror(content));
        return NONE;
      }
      case EventType.RUN_STARTED:
        // A run starts: without a known baseline, its first owned write resynchronizes the client (§13).
        this.resynced = this.known;
        messages.observe(event);
        return NONE;
      default:
        messages.observe(event);
        return NONE;
    }
  }

  /**
   * A STATE_SNAPSHOT whose value is not an object (§11, §13): not sent. Sent,
   * it would take every member the client holds, its own included, and leave
   * a state no delta written for an object applies to; the client keeps the
   * object it holds instead, and later deltas are mended against it, as the
   * server, whose state they were written for, most likely meant them.
   */
  private notObject(event: StateSnapshotEvent, at: At): Step {
    const { tally, lifecycle, reader } = this.shared;
    const findings = [tally.count(finding(at, "wiped", SNAPSHOT_TEXT.notObject(event.snapshot as Json, reader), "discarded"))];
    const verified = verifyStage(lifecycle, event, at, "peek");
    if (verified.decision === "fatal") findings.push(tally.count({ ...verified.findings[0], outcome: "discarded" }));
    return { decision: "drop", findings, out: null };
  }

  /**
   * A STATE_SNAPSHOT under --own or --snapshots delta: a STATE_DELTA in its
   * place (nothing when nothing moved). Undefined: no delta can say it, and
   * it goes as sent.
   */
  private snapshot(event: StateSnapshotEvent, at: At): Step | undefined {
    const { tally, untouched, lifecycle } = this.shared;
    const snap: Json = event.snapshot;
    const held = this.mirror.root;
    const own = this.policy.own;
    let ops: ChangeOp[];
    let findings: Finding[];
    if (own.length > 0) {
      ops = ownedOps(held, snap, own, !this.resynced);
      // §13: outside the owned members the client's value stands, and each member where the snapshot differs from it is said.
      findings = unowned(held, snap, own).map((w) => tally.count(finding(at, "wiped", TEXT.wiped(w.pointer, w.change, true), "kept")));
    } else {
      const delta = snapshotDelta(held, snap);
      if (delta === undefined) return undefined;
      ops = delta;
      findings = untouched.wiped(held, snap, at, "passed").map((f) => tally.count(f));
    }
    const r = this.mirror.normalize(
      ops.map((op, index) => ({ index, op })),
      ops.length,
      SNAPSHOT,
    );
    const sent = r.applied.length > 0;
    if (sent) this.resynced = true;
    for (const op of r.applied) untouched.touch(op.path);
    const verified = verifyStage(lifecycle, event, at, sent ? "feed" : "peek");
    if (verified.decision === "fatal") findings.push(tally.count({ ...verified.findings[0], outcome: sent ? "passed" : "discarded" }));
    if (!sent) return { decision: "drop", findings, out: null };
    const out: JsonObject = { type: EventType.STATE_DELTA, delta: r.applied.map(toWireOp) };
    // The event's own members but its payload: rawEvent, which may hold the whole snapshot again, does not go.
    if (event.timestamp !== undefined) out["timestamp"] = event.timestamp;
    if (event.metadata !== undefined) out["metadata"] = event.metadata;
    if (event.subagentRunId !== undefined) out["subagentRunId"] = event.subagentRunId;
    return { decision: "mend", findings, out };
  }

  /** The mirror of an activity's content, made again if a MESSAGES_SNAPSHOT replaced it. */
  private activityMirror(id: string): Mirror | undefined {
    const activity = this.shared.messages.activity(id);
    if (!activity) return undefined;
    let doc = this.docs.get(id);
    if (doc?.root !== activity.content) this.docs.set(id, (doc = new Mirror(activity.content)));
    return doc;
  }

  /** An ACTIVITY_DELTA for a message that is not an activity the client holds: it goes, with the client's reason. */
  private noActivity(activity: ActivityDeltaEvent, event: AguiEvent | undefined, at: At): Step {
    const { messages, lifecycle, tally, reader } = this.shared;
    // The client skips it (unknown id) or warns (another kind of message): either way it goes.
    const role = messages.role(activity.messageId);
    const verified = event === undefined ? undefined : verifyStage(lifecycle, event, at, "peek");
    const f =
      verified?.decision === "fatal"
        ? verified.findings[0]
        : event === undefined
          ? undefined
          : role === undefined
            ? finding(at, "ignored", TEXT.unknownActivity(activity.messageId, reader))
            : finding(at, "dropped", TEXT.notAnActivity(activity.messageId, role));
    return { decision: role === undefined ? "ignore" : "drop", findings: f ? tally.with([f], "discarded") : NONE, out: null };
  }

  /**
   * A delta made to apply against the mirror. `ops` is its patch as sent,
   * `event` the delta as the client goes on with it (undefined when its
   * schema stage fails), `shell` the event's other members as parsed, `kept`
   * maps its ops to the input's.
   */
  private delta(raw: JsonObject, ops: readonly unknown[], at: At, key: PatchKey, event: AguiEvent | undefined, shell: AguiEvent, kept: number[] | undefined): Step {
    const { messages, lifecycle, tally, untouched, reader } = this.shared;
    let mirror = this.mirror;
    const activity = shell.type === EventType.ACTIVITY_DELTA ? shell : undefined;
    if (activity) {
      const target = this.activityMirror(activity.messageId);
      if (!target) return this.noActivity(activity, event, at);
      mirror = target;
    }
    // The ops the schema stage lets through, decoded; the others are already reported. When it kept every op, each passed it.
    const valid: Indexed[] = [];
    const passed = event !== undefined && kept === undefined;
    for (let i = 0; i < ops.length; i++) {
      if (!passed && opProblem(ops[i]) !== undefined) continue;
      const d = decodeOp(ops[i]);
      if (d.ok) valid.push({ index: i, op: d.value });
    }
    // One transaction: a delta that needs mending is first judged against the mirror as it was, so it is rolled back.
    const judging = event !== undefined && this.diagnose;
    const first = mirror.normalize(valid, ops.length, judging ? this.keepAsSent : this.keepAll);
    const unchanged = event !== undefined && first.asSent;
    const judge = judging && !first.asSent;
    const retype = activity !== undefined && activity.activityType !== messages.activity(activity.messageId)?.activityType;
    const sent = unchanged || first.applied.length > 0 || retype;
    let findings: readonly Reported[] = NONE;
    // verifyEvents reads only the type and the ids, which mending leaves alone. For a delta the
    // schema refused and nothing is sent of, the client never got that far: nothing to report.
    const verified = event || sent ? verifyStage(lifecycle, event ?? shell, at, sent ? "feed" : "peek") : undefined;
    const fatal = verified?.decision === "fatal" ? tally.count({ ...verified.findings[0], outcome: sent ? "passed" : "discarded" }) : undefined;
    if (fatal) findings = [fatal];
    if (judge && event !== undefined && !fatal) {
      // Would the delta as sent have applied? The client's own call answers, against the mirror as it was.
      // A delta the client would have applied, but not as fix does (§5 rules 6 and 7, or an op
      // fast-json-patch takes that RFC 6902 refuses): what fix changed, without a kind.
      const client = verdicts(mirror.root, patchOf(event), at, activity !== undefined, kept, reader);
      // Only asked when the op the client stops at goes out as itself; the mirror is still as it was before the delta.
      const appliesMended = () => verdicts(mirror.root, first.applied.map(toWireOp), at, activity !== undefined, undefined, reader).length === 0;
      findings = changes(client, first, ops, sent, at, tally, "applies", appliesMended);
    } else if (this.diagnose && !unchanged && (fatal || event === undefined)) {
      // The client's run fails at the delta as sent (its schema, or verifyEvents): what fix did with each op.
      findings = [...findings, ...changes(NONE, first, ops, sent, at, tally, "fatal")];
    }
    if (judge) mirror.replay(first.applied);
    if (activity && sent) {
      const content = mirror.root;
      // §10: the mirror of an activity's content stays an object; normalizing keeps the root one (§5 rule 7).
      if (isObject(content)) messages.patched(activity.messageId, { activityType: activity.activityType, content });
    }
    if (!activity && !untouched.empty) for (const op of first.applied) untouched.touch(op.path);
    if (unchanged) return findings.length > 0 ? { decision: "pass", findings, out: undefined } : PASSED;
    if (!sent) return { decision: "drop", findings, out: null };
    return { decision: "mend", findings, out: { ...raw, [key]: first.applied.map(toWireOp) } };
  }
}

/**
 * What fix did with each op of a delta it mended, as findings (§13): every
 * op it discarded (skipped, or applied without a trace in the delta) or sent
 * rewritten, in the order of the ops, each with its outcome; `client` is
 * the client's verdicts on the delta as sent (the op it stops at first).
 * An op the client's verdicts name is reported in their words (code, hint,
 * `stops`); another, in the words of the core's skip or of the rule that
 * rewrote it. Every finding's kind is the event's as sent: the client's
 * verdicts', or, when they are none, `fatal` for a delta whose run fails
 * there, and no kind for one the client would have applied (`otherwise`).
 * The stop op, should fix send it as itself, is reported `passed`, unless the
 * delta as mended applies (`appliesMended`): then it failed only for what an
 * earlier op did, which fix left out (a move of the root into itself), and
 * it is reported `mended`.
 */
function changes(client: readonly Finding[], r: Normalized, ops: readonly unknown[], sent: boolean, at: At, tally: Tally, otherwise: "applies" | "fatal", appliesMended: () => boolean = () => false): Reported[] {
  const kind = client[0]?.kind ?? (otherwise === "fatal" ? "fatal" : undefined);
  const named = new Map<number, Finding>();
  const out: Reported[] = [];
  for (const f of client) {
    if (f.index === undefined) out.push(tally.count({ ...f, outcome: sent ? "mended" : "discarded" }));
    else named.set(f.index, f);
  }
  const { skips, changed } = r;
  for (let s = 0, c = 0; s < skips.length || c < changed.length; ) {
    const skip = skips[s];
    const change = changed[c];
    const index = skip !== undefined && (change === undefined || skip.index < change.index) ? (s++, skip.index) : (c++, (change as Changed).index);
    const outcome = !sent || change?.index !== index ? "discarded" : change.outcome;
    const theirs = named.get(index);
    if (theirs !== undefined) {
      named.delete(index);
      out.push(tally.count({ ...theirs, outcome }));
      continue;
    }
    const path = isObject(ops[index]) ? (ops[index] as JsonObject)["path"] : undefined;
    const words = skip?.index === index ? skip.error : outcome === "discarded" ? SNAPSHOT_TEXT.nothingMoved() : SNAPSHOT_TEXT.rewritten();
    const f = { index, ...(typeof path === "string" ? { pointer: path } : {}), code: words.code, message: words.message };
    out.push(tally.count(kind === undefined ? applies(at, f, outcome) : finding(at, kind, f, outcome)));
  }
  // The op the client stops at, sent as itself: the client refuses the mended delta there too, unless it failed for an op left out.
  for (const f of named.values()) if (stopsHere(f)) out.push(tally.count({ ...f, outcome: sent && appliesMended() ? "mended" : "passed" }));
  return out;
}

/** A snapshot's delta is the mirror's next state: what normalizing it did always stands. */
const SNAPSHOT: NormalizeOptions = { joinKeys: false, keep: "all" };

/** A delta event's patch as the client goes on with it. */
const patchOf = (event: AguiEvent): readonly unknown[] => (event.type === EventType.STATE_DELTA ? event.delta : event.type === EventType.ACTIVITY_DELTA ? event.patch : []);
