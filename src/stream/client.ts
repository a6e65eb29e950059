import { EventType, type ActivityDeltaEvent, type Event as AguiEvent } from "@ag-ui/core";
import jsonpatch, { type Operation } from "fast-json-patch";
import { cloneJson, decodeOp, parsePointer, toWireOp, type ChangeOp, type Json, type JsonObject, type Path } from "../core/index.js";
import { TEXT, UNUSABLE, cloneable, diagnosePatch, finding, inherited, printable, type At, type Finding, type Kind, type OpFinding, type Outcome, type Reader } from "./findings.js";
import { Lifecycle } from "./lifecycle.js";
import { Messages, type Activity } from "./messages.js";
import { Mirror, type Indexed, type Normalized } from "./mirror.js";
import { opProblem } from "./schema.js";
import { ownedOps, ownedRoot, snapshotDelta, wipes } from "./snapshots.js";
import { decisionOf, dropped, messageClash, outcomeOf, verdict } from "./verdicts.js";
import { enforceStage, patchKey, topLevelShell, transport, verifyStage, type Decision, type PatchKey } from "./stages.js";

/**
 * The one model of @ag-ui/client 1.0.0 reading a stream: the stages of
 * stages.ts (transport, enforce, verify), then the apply stage. Without a
 * repair policy (`check`) the apply stage is the client's own:
 * defaultApplyEvents, with fast-json-patch's `applyPatch(x, patch, true,
 * false)`, so whether a patch applies is the client's answer. With one
 * (`fix`, `proxy`) it writes what the client should be sent instead: each
 * delta normalized against a mirror of what the client holds (mirror.ts),
 * and snapshots as the policy says (snapshots.ts).
 */

/** The repair policy of the apply stage (protocol/README.md §13). */
export interface Policy {
  /** The members the server owns (--own): a snapshot replaces only these. */
  own: readonly Path[];
  /** `delta`: a snapshot goes as the minimal STATE_DELTA (--snapshots). */
  snapshots: "pass" | "delta";
  /** Read an unescaped key's segments as one member name (--join-keys). */
  joinKeys: boolean;
}

export const PASSTHROUGH: Policy = { own: [], snapshots: "pass", joinKeys: false };

/** The summary of a stream: events read, of them deltas, and how many events had a finding of each kind. */
export interface Summary {
  events: number;
  deltas: number;
  dropped: number;
  ignored: number;
  fatal: number;
  wiped: number;
}

/** What became of one event: `out` undefined sends it as it came, null sends nothing, an object is sent in its place. */
export interface Step {
  decision: Decision;
  findings: Finding[];
  out: JsonObject | null | undefined;
}

export interface ClientOptions {
  /** What the client holds when the stream starts (default {}): its baseline. */
  state?: JsonObject;
  /** The apply stage's repair policy; absent: apply as the client does (`check`). */
  repair?: Policy;
  /** How many ids of messages other than activities to remember (fix's bound on memory; check: all). */
  remember?: number;
  /**
   * fix: work out the client's verdict on each delta it mends (default true).
   * It copies the mirror, so a fix whose findings nobody reads skips it; its
   * exit status never depends on it.
   */
  diagnose?: boolean;
}

/** No findings: shared, and never written to. */
const NONE: Finding[] = Object.freeze([]) as unknown as Finding[];
/** The step of an event that goes on as it came, with nothing to say. */
const PASSED: Step = Object.freeze({ decision: "pass", findings: NONE, out: undefined });
const IGNORED: Step = Object.freeze({ decision: "ignore", findings: NONE, out: undefined });

export class Client {
  readonly messages: Messages;
  private readonly lifecycle: Lifecycle;
  private readonly repair: Policy | undefined;
  private readonly reader: Reader;
  private readonly diagnose: boolean;
  /** check: what the client holds, as fast-json-patch left it (possibly not JSON). */
  private held: Json;
  /** fix: the mirror of the state, and of each activity's content. */
  private readonly mirror: Mirror;
  private readonly docs = new Map<string, Mirror>();
  /** The baseline's root members that no event of the stream has written yet: a snapshot that changes one wipes it. */
  private readonly untouched: Set<string>;
  /** --own: whether this run has had its opening add. */
  private resynced = false;
  readonly summary: Summary = { events: 0, deltas: 0, dropped: 0, ignored: 0, fatal: 0, wiped: 0 };
  readonly outcomes: Record<Outcome, number> = { passed: 0, mended: 0, discarded: 0, kept: 0 };
  /** The last event each kind was counted for: an event counts once per kind. */
  private readonly counted: Record<Kind, number> = { dropped: 0, ignored: 0, fatal: 0, wiped: 0 };
  /** check: the fatal finding that ended the client's run; it applies nothing after it. */
  stopped: Finding | undefined;
  /** fix: findings about events that went out as they came and still fail or warn on the client. */
  unfixed = 0;

  constructor(opts: ClientOptions = {}) {
    const state = opts.state ?? {};
    this.repair = opts.repair;
    this.reader = opts.repair ? "fix" : "check";
    this.diagnose = opts.diagnose ?? true;
    this.messages = new Messages(opts.remember);
    this.lifecycle = new Lifecycle(opts.remember);
    this.held = state;
    this.mirror = new Mirror(opts.repair ? cloneJson(state) : {});
    this.untouched = new Set(Object.keys(state));
  }

  /** What the client holds now. */
  get state(): Json {
    return this.repair ? this.mirror.root : this.held;
  }

  get activities(): ReadonlyMap<string, Activity> {
    return this.messages.activities;
  }

  /** The client's transport gave up before the event (check's SSE buffer limit): its run fails here. */
  overflow(line: number, f: Omit<OpFinding, "index" | "pointer">): Finding | undefined {
    if (this.stopped) return undefined;
    const out = this.count(finding({ event: ++this.summary.events, line, type: "" }, "fatal", f));
    this.stopped = out;
    return out;
  }

  /** One event's data (starting on `line` of the input) through the pipeline. */
  feed(data: string, line: number): Step {
    const event = ++this.summary.events;
    // After a fatal finding the client's run has failed: it applies nothing more.
    if (this.stopped && !this.repair) return IGNORED;
    const t = transport(data, event, line);
    if (t.decision === "fatal") return this.refused(t.findings, "fatal");
    const key = patchKey(t.at.type);
    if (key !== undefined) this.summary.deltas++;
    return this.repair ? this.fix(t.raw, t.at, key, this.repair) : this.check(t.raw, t.at);
  }

  private count(f: Finding): Finding {
    if (this.counted[f.kind] !== f.event) {
      this.counted[f.kind] = f.event;
      this.summary[f.kind]++;
    }
    this.outcomes[f.outcome]++;
    if (this.repair && f.outcome === "passed" && f.kind !== "wiped") this.unfixed++;
    return f;
  }

  private with(fs: readonly Finding[], outcome: Outcome): Finding[] {
    if (fs.length === 0) return NONE;
    return fs.map((f) => this.count(f.outcome === outcome ? f : { ...f, outcome }));
  }

  /** An event that passes on as it came although the client refuses it (fix), or that ends the run (check). */
  private refused(findings: readonly Finding[], decision: Decision): Step {
    const out = this.with(findings, "passed");
    if (!this.repair && decision === "fatal") this.stopped = out.find((f) => f.kind === "fatal");
    return { decision, findings: out, out: undefined };
  }

  // ------------------------------------------------------------------ check

  private check(raw: JsonObject, at: At): Step {
    const e = enforceStage(raw, at);
    if (e.decision === "drop" || e.decision === "fatal") return this.refused(e.findings, e.decision);
    const broken = verifyStage(this.lifecycle, e.event, at, false);
    if (broken) return this.refused([...e.findings, broken], "fatal");
    const indexOf = (i: number): number => (e.kept ? (e.kept[i] as number) : i);
    const applied = this.applyAsClient(e.event, at, indexOf);
    if (applied.length === 0 && e.findings.length === 0) return PASSED;
    const findings = this.with([...e.findings, ...applied], "passed");
    const fatal = findings.find((f) => f.kind === "fatal");
    if (fatal) this.stopped = fatal;
    return { decision: fatal ? "fatal" : findings.length ? decisionOf(findings[findings.length - 1] as Finding) : e.decision, findings, out: undefined };
  }

  /** defaultApplyEvents for one event that passed the stages before it. */
  private applyAsClient(event: AguiEvent, at: At, indexOf: (i: number) => number): Finding[] {
    switch (event.type) {
      case EventType.STATE_SNAPSHOT: {
        const lost = this.wiped(this.held, event.snapshot as Json, at, "passed");
        this.held = event.snapshot as Json;
        return lost;
      }
      case EventType.STATE_DELTA: {
        // The client hands the event's own ops to fast-json-patch, which may change their values as it goes; the diagnosis needs them as sent.
        const sent = jsonpatch.deepClone(event.delta) as Operation[];
        let next: Json;
        try {
          next = jsonpatch.applyPatch(this.held, event.delta as Operation[], true, false).newDocument;
        } catch {
          // The client's warning prints its state with JSON.stringify: on a cycle that throws too, and the run fails.
          if (this.held !== undefined && !printable(this.held)) {
            return [finding(at, "fatal", { code: "UNUSABLE_STATE", message: `${UNUSABLE}; the client's warning, which prints the state, fails too, and so does its run` })];
          }
          return [dropped(at, diagnosePatch(this.held, sent, indexOf, this.reader), false)];
        }
        this.held = next;
        this.written(sent);
        // The client then copies its new state with structuredClone, outside any try: a function in it fails the run.
        return cloneable(next) ? NONE : [finding(at, "fatal", inherited(false))];
      }
      case EventType.ACTIVITY_SNAPSHOT:
        this.messages.snapshot(event.messageId, event.activityType, structuredClone(event.content) as JsonObject, event.replace !== false);
        return NONE;
      case EventType.ACTIVITY_DELTA: {
        const f = this.activityDelta(event, at, indexOf);
        return f ? [f] : NONE;
      }
      default: {
        const clash = messageClash(this.messages, event, at);
        if (!clash) this.messages.observe(event);
        return clash ? [clash] : NONE;
      }
    }
  }

  private activityDelta(event: ActivityDeltaEvent, at: At, indexOf: (i: number) => number): Finding | undefined {
    const id = event.messageId;
    const role = this.messages.role(id);
    if (role === undefined) return finding(at, "ignored", TEXT.unknownActivity(id, this.reader));
    const activity = this.messages.activity(id);
    if (activity === undefined) return finding(at, "dropped", TEXT.notAnActivity(id, role));
    const sent = jsonpatch.deepClone(event.patch) as Operation[];
    let content: JsonObject;
    try {
      content = jsonpatch.applyPatch(structuredClone(activity.content), event.patch as Operation[], true, false).newDocument as JsonObject;
    } catch {
      return dropped(at, diagnosePatch(activity.content, sent, indexOf, this.reader), true);
    }
    // The client copies the patched content inside its try: a function in it is a warning there.
    if (!cloneable(content)) return finding(at, "dropped", inherited(true));
    this.messages.patched(id, { activityType: event.activityType, content });
    return undefined;
  }

  /** Root members the ops write: a snapshot that changes them later wipes nothing of the client's. */
  private written(ops: readonly Operation[]): void {
    if (this.untouched.size === 0) return;
    for (const op of ops) {
      for (const p of op.op === "move" ? [op.path, op.from] : [op.path]) {
        const parsed = parsePointer(p);
        if (parsed.ok) this.touch(parsed.value);
      }
    }
  }

  private touch(path: Path): void {
    if (path.length === 0) this.untouched.clear();
    else this.untouched.delete(path[0] as string);
  }

  /** The `wiped` findings of a snapshot: members of the baseline it removes or replaces, which the stream never set. */
  private wiped(held: Json, snapshot: Json, at: At, outcome: Outcome): Finding[] {
    if (this.untouched.size === 0) return [];
    const lost = wipes(held, snapshot, (name) => this.untouched.has(name));
    // What the snapshot set is the server's from here on.
    for (const w of lost) this.untouched.delete(w.name);
    return lost.map((w) => finding(at, "wiped", TEXT.wiped(w.pointer, w.removes, false), outcome));
  }

  // -------------------------------------------------------------------- fix

  private fix(raw: JsonObject, at: At, key: PatchKey | undefined, policy: Policy): Step {
    const e = enforceStage(raw, at);
    if (key !== undefined && Array.isArray(raw[key])) {
      const ok = e.decision === "pass" || e.decision === "strip";
      // A delta the schema refuses only for some of its ops: those go, and the rest is mended.
      const shell = ok ? e.event : e.decision === "fatal" ? topLevelShell(raw, key) : undefined;
      if (shell !== undefined) {
        const findings = this.with(e.findings, "discarded");
        const step = this.delta(raw, at, key, ok ? e.event : undefined, shell, ok ? e.kept : undefined, policy);
        return findings.length === 0 ? step : { ...step, findings: [...findings, ...step.findings] };
      }
    }
    if (e.decision === "drop" || e.decision === "fatal") {
      // A delta whose other members the client refuses cannot be mended without guessing: it goes.
      if (key !== undefined && e.decision === "fatal") return { decision: "drop", findings: this.with(e.findings, "discarded"), out: null };
      return this.refused(e.findings, e.decision);
    }
    if (e.event.type === EventType.STATE_SNAPSHOT && (policy.own.length > 0 || policy.snapshots === "delta")) {
      const step = this.snapshot(e.event.snapshot as Json, e.event, at, policy);
      if (step) return step;
    }
    const broken = verifyStage(this.lifecycle, e.event, at, false);
    const clash = broken ? undefined : messageClash(this.messages, e.event, at);
    const seen = clash ? NONE : this.observe(e.event, at);
    if (!broken && !clash) return seen.length === 0 ? PASSED : { decision: "wipe", findings: seen, out: undefined };
    const findings = [this.count((broken ?? clash) as Finding), ...seen];
    return { decision: broken ? "fatal" : "drop", findings, out: undefined };
  }

  /** What the client does with an event that is not a delta, kept in the mirror. */
  private observe(event: AguiEvent, at: At): Finding[] {
    switch (event.type) {
      case EventType.STATE_SNAPSHOT: {
        const lost = this.wiped(this.mirror.root, event.snapshot as Json, at, "passed").map((f) => this.count(f));
        this.mirror.reset(event.snapshot as Json);
        return lost;
      }
      case EventType.ACTIVITY_SNAPSHOT: {
        const content = event.content as JsonObject;
        this.messages.snapshot(event.messageId, event.activityType, content, event.replace !== false);
        if (this.messages.activity(event.messageId)?.content === content) this.docs.set(event.messageId, new Mirror(content));
        return NONE;
      }
      case EventType.RUN_STARTED:
        this.resynced = false;
        this.messages.observe(event);
        return NONE;
      default:
        this.messages.observe(event);
        return NONE;
    }
  }

  /**
   * A STATE_SNAPSHOT under --own or --snapshots delta: a STATE_DELTA in its
   * place (nothing when nothing moved). Undefined: no delta can say it, and
   * it goes as sent.
   */
  private snapshot(snap: Json, event: AguiEvent, at: At, policy: Policy): Step | undefined {
    const held = this.mirror.root;
    let ops: ChangeOp[];
    let findings: Finding[];
    if (policy.own.length > 0) {
      ops = ownedOps(held, snap, policy.own, !this.resynced);
      findings = wipes(held, snap, (name) => !ownedRoot(policy.own, name)).map((w) => this.count(finding(at, "wiped", TEXT.wiped(w.pointer, w.removes, true), "kept")));
    } else {
      const delta = snapshotDelta(held, snap);
      if (delta === undefined) return undefined;
      ops = delta;
      findings = this.wiped(held, snap, at, "passed").map((f) => this.count(f));
    }
    const r = this.mirror.normalize(ops.map((op, index) => ({ index, op })), false);
    const sent = r.applied.length > 0;
    if (sent) this.resynced = true;
    for (const op of r.applied) this.touch(op.path);
    const broken = verifyStage(this.lifecycle, event, at, !sent);
    if (broken) findings.push(this.count({ ...broken, outcome: sent ? "passed" : "discarded" }));
    if (!sent) return { decision: "drop", findings, out: null };
    const out: JsonObject = { type: EventType.STATE_DELTA, delta: r.applied.map(toWireOp) as unknown as Json[] };
    // The event's own members but its payload: rawEvent, which may hold the whole snapshot again, does not go.
    if (event.timestamp !== undefined) out["timestamp"] = event.timestamp;
    if (event.metadata !== undefined) out["metadata"] = event.metadata as JsonObject;
    if ("subagentRunId" in event && event.subagentRunId !== undefined) out["subagentRunId"] = event.subagentRunId;
    return { decision: "mend", findings, out };
  }

  /** The mirror of an activity's content, made again if a MESSAGES_SNAPSHOT replaced it. */
  private activityMirror(id: string): Mirror | undefined {
    const activity = this.messages.activity(id);
    if (!activity) return undefined;
    let doc = this.docs.get(id);
    if (doc?.root !== activity.content) this.docs.set(id, (doc = new Mirror(activity.content)));
    return doc;
  }

  /**
   * A delta made to apply against the mirror. `event` is the delta as the
   * client goes on with it (undefined when its schema stage fails), `shell`
   * the event's other members as parsed, `kept` maps its ops to the input's.
   */
  private delta(raw: JsonObject, at: At, key: PatchKey, event: AguiEvent | undefined, shell: AguiEvent, kept: number[] | undefined, policy: Policy): Step {
    const ops = raw[key] as unknown[];
    let mirror = this.mirror;
    const activity = shell.type === EventType.ACTIVITY_DELTA ? shell : undefined;
    if (activity) {
      const target = this.activityMirror(activity.messageId);
      if (!target) {
        // The client skips it (unknown id) or warns (another kind of message): either way it goes.
        const role = this.messages.role(activity.messageId);
        const lifecycle = event && verifyStage(this.lifecycle, event, at, true);
        const f = lifecycle ?? (event === undefined ? undefined : role === undefined ? finding(at, "ignored", TEXT.unknownActivity(activity.messageId, this.reader)) : finding(at, "dropped", TEXT.notAnActivity(activity.messageId, role)));
        return { decision: role === undefined ? "ignore" : "drop", findings: f ? this.with([f], "discarded") : [], out: null };
      }
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
    // One transaction: a delta that needs mending is first judged against the mirror as it was.
    mirror.begin();
    const first = mirror.normalize(valid, policy.joinKeys);
    const unchanged = event !== undefined && sameAsSent(first, valid, ops.length);
    const judge = event !== undefined && !unchanged && this.diagnose;
    if (judge) mirror.abort();
    else mirror.commit();
    const retype = activity !== undefined && activity.activityType !== this.messages.activity(activity.messageId)?.activityType;
    const sent = unchanged || first.applied.length > 0 || retype;
    let found: Finding | undefined;
    // verifyEvents reads only the type and the ids, which mending leaves alone. For a delta the
    // schema refused and nothing is sent of, the client never got that far: nothing to report.
    const lifecycle = event || sent ? verifyStage(this.lifecycle, event ?? shell, at, !sent) : undefined;
    if (lifecycle) found = this.count({ ...lifecycle, outcome: sent ? "passed" : "discarded" });
    else if (judge) {
      // Would the delta as sent have applied? The client's own call answers, against the mirror as it was.
      const f = verdict(mirror.root, event.type === EventType.STATE_DELTA ? event.delta : event.type === EventType.ACTIVITY_DELTA ? event.patch : [], at, activity !== undefined, kept, this.reader);
      if (f) found = this.count({ ...f, outcome: outcomeOf(f, first, sent, valid) });
    }
    const findings = found ? [found] : NONE;
    const r = judge ? mirror.normalize(valid, policy.joinKeys) : first;
    if (activity && sent) this.messages.patched(activity.messageId, { activityType: activity.activityType, content: mirror.root as JsonObject });
    if (!activity && this.untouched.size > 0) for (const op of r.applied) this.touch(op.path);
    if (unchanged) return found ? { decision: "pass", findings, out: undefined } : PASSED;
    if (!sent) return { decision: "drop", findings, out: null };
    return { decision: "mend", findings, out: { ...raw, [key]: r.applied.map(toWireOp) as unknown as Json[] } };
  }
}

/** Whether normalizing changed nothing: every op as sent applied as itself, and none was left out. */
function sameAsSent(r: Normalized, valid: readonly Indexed[], sent: number): boolean {
  if (valid.length !== sent || r.skips.length !== 0 || r.joined.size !== 0 || r.applied.length !== valid.length) return false;
  for (let k = 0; k < valid.length; k++) {
    const a = r.applied[k] as ChangeOp;
    // protocol/README.md §5 rule 7: a replace whose last token is "-" goes as an add.
    if (a !== valid[k]?.op || (a.op === "replace" && a.path[a.path.length - 1] === "-")) return false;
  }
  return true;
}
