import { EventType, type ActivityDeltaEvent, type Event as AguiEvent } from "@ag-ui/core";
import jsonpatch, { type Operation } from "fast-json-patch";
import { isObject, type Json, type JsonObject } from "../core/index.js";
import { SNAPSHOT_TEXT, TEXT, UNUSABLE, cloneable, finding, inherited, printable, type At, type Finding, type OpFinding, type Reader } from "./findings.js";
import { diagnosePatch } from "./patch-verdicts.js";
import type { Messages } from "./messages.js";
import type { Decision } from "./stages.js";
import { NONE } from "./tally.js";
import type { Untouched } from "./untouched.js";
import { decisionOf, droppedAt, messageClash } from "./verdicts.js";

/**
 * The apply stage as @ag-ui/client 1.0.0 runs it (`check`, no repair
 * policy): defaultApplyEvents, with fast-json-patch's `applyPatch(x, patch,
 * true, false)`, so whether a patch applies is the client's own answer.
 */

/** The apply stage's decision on one event, with its findings. */
export interface Applied {
  decision: Decision;
  findings: readonly Finding[];
}

const APPLIED: Applied = Object.freeze({ decision: "pass", findings: NONE });

/** The decision a list of findings comes to: fatal if any is, else the last one's kind; pass when there are none. */
export function decide(findings: readonly Finding[], otherwise: Decision = "pass"): Decision {
  const last = findings[findings.length - 1];
  if (last === undefined) return otherwise;
  return findings.some((f) => f.kind === "fatal") ? "fatal" : decisionOf(last);
}

export class ClientApply {
  /** What the client holds, as fast-json-patch left it (possibly not JSON). */
  held: Json;
  /** The event of the STATE_SNAPSHOT that left the state something other than an object, while it stands. */
  private notObjectSince: number | undefined;

  constructor(
    state: JsonObject,
    private readonly messages: Messages,
    private readonly untouched: Untouched,
    private readonly reader: Reader,
  ) {
    this.held = state;
  }

  /** defaultApplyEvents for one event that passed the stages before it; `indexOf` maps the event's ops to the ops as sent. */
  apply(event: AguiEvent, at: At, indexOf: (i: number) => number): Applied {
    const findings = this.findings(event, at, indexOf);
    return findings.length === 0 ? APPLIED : { decision: decide(findings), findings };
  }

  private findings(event: AguiEvent, at: At, indexOf: (i: number) => number): readonly Finding[] {
    switch (event.type) {
      case EventType.STATE_SNAPSHOT: {
        // The schema stage parsed it: its snapshot is JSON, whatever its root.
        const snapshot: Json = event.snapshot;
        const object = isObject(snapshot);
        const out: Finding[] = [];
        // §11: the client takes any value; one that is not an object is a finding of its own, at its cause.
        if (!object) out.push(finding(at, "wiped", SNAPSHOT_TEXT.notObject(snapshot, this.reader)));
        const unknown = this.untouched.replaced(at, this.reader, "passed", !object);
        if (unknown) out.push(unknown);
        out.push(...this.untouched.wiped(this.held, snapshot, at, "passed"));
        this.held = snapshot;
        this.notObjectSince = object ? undefined : at.event;
        return out.length === 0 ? NONE : out;
      }
      case EventType.STATE_DELTA:
        return this.stateDelta(event.delta, at, indexOf);
      case EventType.ACTIVITY_SNAPSHOT:
        this.messages.snapshot(event.messageId, event.activityType, structuredClone(event.content), event.replace !== false);
        return NONE;
      case EventType.ACTIVITY_DELTA: {
        const f = this.activityDelta(event, at, indexOf);
        return f === undefined ? NONE : Array.isArray(f) ? f : [f as Finding];
      }
      default: {
        const clash = messageClash(this.messages, event, at);
        if (!clash) this.messages.observe(event);
        return clash ? [clash] : NONE;
      }
    }
  }

  private stateDelta(delta: Operation[], at: At, indexOf: (i: number) => number): readonly Finding[] {
    // The client hands the event's own ops to fast-json-patch, which may change their values as it goes; the diagnosis needs them as sent.
    const sent = jsonpatch.deepClone(delta) as Operation[];
    let next: Json;
    try {
      next = jsonpatch.applyPatch(this.held, delta, true, false).newDocument;
    } catch {
      // The client's warning prints its state with JSON.stringify: on a cycle that throws too, and the run fails.
      if (this.held !== undefined && !printable(this.held)) {
        return [finding(at, "fatal", { code: "UNUSABLE_STATE", message: `${UNUSABLE}; the client's warning, which prints the state, fails too, and so does its run` })];
      }
      return droppedAt(at, this.cause(diagnosePatch(this.held, sent, indexOf, this.reader)), false);
    }
    this.held = next;
    this.untouched.written(sent);
    // The client then copies its new state with structuredClone, outside any try: a function in it fails the run.
    return cloneable(next) ? NONE : [finding(at, "fatal", inherited(false))];
  }

  /** A delta's findings while the state is not an object: the snapshot that made it so is the cause, named in the hint. */
  private cause(fs: readonly OpFinding[]): readonly OpFinding[] {
    const since = this.notObjectSince;
    return since === undefined ? fs : fs.map((f) => ({ ...f, hint: SNAPSHOT_TEXT.afterNotObject(since) }));
  }

  private activityDelta(event: ActivityDeltaEvent, at: At, indexOf: (i: number) => number): readonly Finding[] | Finding | undefined {
    const id = event.messageId;
    const role = this.messages.role(id);
    if (role === undefined) return finding(at, "ignored", TEXT.unknownActivity(id, this.reader));
    const activity = this.messages.activity(id);
    if (activity === undefined) return finding(at, "dropped", TEXT.notAnActivity(id, role));
    const sent = jsonpatch.deepClone(event.patch) as Operation[];
    let content: JsonObject;
    try {
      content = jsonpatch.applyPatch(structuredClone(activity.content), event.patch, true, false).newDocument;
    } catch {
      return droppedAt(at, diagnosePatch(activity.content, sent, indexOf, this.reader), true);
    }
    // The client copies the patched content inside its try: a function in it is a warning there.
    if (!cloneable(content)) return finding(at, "dropped", inherited(true));
    this.messages.patched(id, { activityType: event.activityType, content });
    return undefined;
  }
}
