import jsonpatch, { type Operation } from "fast-json-patch";
import type { Json, JsonObject } from "../core/json.js";
import { admitSchema, lifecycleFinding } from "./admit.js";
import { UNUSABLE, cloneable, diagnosePatch, finding, inherited, printable, type At, type Finding, type OpFinding } from "./findings.js";
import { Lifecycle } from "./lifecycle.js";
import { Messages, type Activity } from "./messages.js";

type Ev = Record<string, unknown>;

/**
 * @ag-ui/client 1.0.0 replaying one event stream, as far as state and
 * activities go: the stages of admit.ts, then defaultApplyEvents' handling of
 * STATE_SNAPSHOT, STATE_DELTA, ACTIVITY_SNAPSHOT, ACTIVITY_DELTA, and the
 * messages the other events create (messages.ts). Patches are applied with
 * fast-json-patch's `jsonpatch.applyPatch(x, patch, true, false)`, the client's own
 * call, so whether one applies is the client's answer, not an emulation.
 *
 * The stream is one pipeline, as one connection is: after a fatal finding the
 * client's run has failed and it applies nothing more (`stopped`).
 */
export class ClientModel {
  state: Json;
  readonly messages = new Messages();
  private readonly lifecycle = new Lifecycle();
  /** The fatal finding that ended the run, once there is one. */
  stopped: Finding | undefined;

  constructor(state: JsonObject = {}) {
    this.state = state;
  }

  get activities(): ReadonlyMap<string, Activity> {
    return this.messages.activities;
  }

  /** Replays one event (its data text); returns what the client would not apply. */
  feed(data: string, at: At): Finding[] {
    if (this.stopped) return [];
    const admitted = admitSchema(data, at);
    if (!admitted.ok) return this.stop(admitted.findings, admitted.fatal);
    const broken = lifecycleFinding(this.lifecycle, admitted.event, at, false);
    if (broken) return this.stop([...admitted.findings, broken], true);
    const applied = this.apply(admitted.event, at, (i) => (admitted.kept ? (admitted.kept[i] as number) : i));
    if (!applied) return admitted.findings;
    return this.stop([...admitted.findings, applied], applied.kind === "fatal");
  }

  private stop(findings: Finding[], fatal: boolean): Finding[] {
    if (fatal) this.stopped = findings.find((f) => f.kind === "fatal");
    return findings;
  }

  /** defaultApplyEvents for one event that passed the pipeline. */
  private apply(event: Ev, at: At, indexOf: (i: number) => number): Finding | undefined {
    switch (event["type"]) {
      case "STATE_SNAPSHOT":
        this.state = event["snapshot"] as Json;
        return undefined;
      case "STATE_DELTA": {
        // The client hands the event's own ops to fast-json-patch, which may change their values as it goes; the diagnosis needs them as sent.
        const delta = event["delta"] as Operation[];
        const sent = jsonpatch.deepClone(delta) as Operation[];
        let next: Json;
        try {
          next = jsonpatch.applyPatch(this.state, delta, true, false).newDocument;
        } catch {
          // The client's warning prints its state with JSON.stringify: on a cycle that throws too, and the run fails.
          if (this.state !== undefined && !printable(this.state)) {
            return finding(at, "fatal", { code: "UNUSABLE_STATE", message: `${UNUSABLE}; the client's warning, which prints the state, fails too, and so does its run` });
          }
          return dropped(at, diagnosePatch(this.state, sent, indexOf), "the client warns and keeps its state");
        }
        this.state = next;
        // The client then copies its new state with structuredClone, outside any try: a function in it fails the run.
        return cloneable(next) ? undefined : finding(at, "fatal", inherited(false));
      }
      case "ACTIVITY_SNAPSHOT":
        this.messages.snapshot(event["messageId"] as string, event["activityType"] as string, structuredClone(event["content"]) as JsonObject, event["replace"] !== false);
        return undefined;
      case "ACTIVITY_DELTA":
        return this.activityDelta(event, at, indexOf);
      default: {
        const clash = messageClash(this.messages, event, at);
        if (!clash) this.messages.observe(event);
        return clash;
      }
    }
  }

  private activityDelta(event: Ev, at: At, indexOf: (i: number) => number): Finding | undefined {
    const id = event["messageId"] as string;
    const role = this.messages.role(id);
    if (role === undefined) {
      return finding(at, "ignored", { code: "UNKNOWN_ACTIVITY", message: `the client has no activity ${JSON.stringify(id)} and skips the delta without a word`, hint: `send an ACTIVITY_SNAPSHOT for ${JSON.stringify(id)} before its deltas (\`fix\` drops this one)` });
    }
    const activity = this.messages.activity(id);
    if (activity === undefined) {
      return finding(at, "dropped", { code: "NOT_AN_ACTIVITY", message: `message ${JSON.stringify(id)} is a ${role} message, not an activity: the client warns and skips the delta` });
    }
    const patch = event["patch"] as Operation[];
    const sent = jsonpatch.deepClone(patch) as Operation[];
    let content: JsonObject;
    try {
      content = jsonpatch.applyPatch(structuredClone(activity.content), patch, true, false).newDocument as JsonObject;
    } catch {
      return dropped(at, diagnosePatch(activity.content, sent, indexOf), "the client warns and keeps the activity as it was");
    }
    // The client copies the patched content inside its try: a function in it is a warning there.
    if (!cloneable(content)) return finding(at, "dropped", inherited(true));
    this.messages.patched(id, { activityType: event["activityType"] as string, content });
    return undefined;
  }
}

const MESSAGE_EVENTS = new Set(["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"]);

/**
 * The text and reasoning events the client warns on and drops because of an
 * activity: an id that names an activity message (ids are unique across
 * activity and text messages), or, for content and end, no message at all
 * (its start was dropped, or a MESSAGES_SNAPSHOT removed it).
 */
export function messageClash(messages: Messages, event: Ev, at: At): Finding | undefined {
  const type = event["type"] as string;
  if (!MESSAGE_EVENTS.has(type)) return undefined;
  const id = event["messageId"] as string;
  const role = messages.role(id);
  if (role === "activity") return finding(at, "dropped", { code: "ACTIVITY_ID_CLASH", message: `message ${JSON.stringify(id)} is an activity: the client warns and drops the ${type.startsWith("TEXT") ? "text" : "reasoning"} (message ids are unique across activity and other messages)` });
  if (role === undefined && !type.endsWith("_START")) return finding(at, "dropped", { code: "UNKNOWN_MESSAGE", message: `the client has no message ${JSON.stringify(id)}: it warns and drops the event` });
  return undefined;
}

function dropped(at: At, f: OpFinding, what: string): Finding {
  return finding(at, "dropped", { ...f, message: `${f.message}; ${what}` });
}
