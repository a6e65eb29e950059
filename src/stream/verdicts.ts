import { EventType, type Event as AguiEvent } from "@ag-ui/core";
import type { Json } from "../core/index.js";
import { TEXT, finding, inherited, type At, type Finding, type OpFinding, type Reader, type Stops } from "./findings.js";
import { INHERITS, patchVerdicts } from "./patch-verdicts.js";
import type { Messages } from "./messages.js";
import type { Decision } from "./stages.js";
import { NONE } from "./tally.js";

/** The apply stage's verdicts on one event, shared by its two forms (client-apply.ts, repair-apply.ts). */

const MESSAGE_EVENTS: ReadonlySet<string> = new Set([EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END, EventType.REASONING_MESSAGE_START, EventType.REASONING_MESSAGE_CONTENT, EventType.REASONING_MESSAGE_END]);

/** The findings for a delta the client would drop: fast-json-patch's verdicts on it (the op it stops at first, marked), or the one for a patch that leaves a function; none when it applies. */
export function verdicts(root: Json, patch: readonly unknown[], at: At, activity: boolean, kept: number[] | undefined, reader: Reader): readonly Finding[] {
  const fs = patchVerdicts(root, patch, (i) => (kept ? (kept[i] ?? i) : i), reader);
  if (fs[0] === INHERITS) return [finding(at, activity ? "dropped" : "fatal", inherited(activity))];
  return fs.length === 0 ? NONE : droppedAt(at, fs, activity);
}

/**
 * The findings of a delta the client drops, one per op that fails (patchVerdicts):
 * the first is the op it stops at, marked `stops` (§13).
 */
export function droppedAt(at: At, fs: readonly OpFinding[], activity: boolean): Finding[] {
  return fs.map((f, i) => (i === 0 ? stopping(dropped(at, f, activity)) : dropped(at, f, activity)));
}

/** The finding marked as the op the client stops at: `stops` after `outcome`, as §13 orders a finding's members. */
export function stopping(f: Finding): Finding {
  (f as Stops).stops = true;
  return f;
}

export function dropped(at: At, f: OpFinding, activity: boolean): Finding {
  return finding(at, "dropped", { ...f, message: `${f.message}; ${TEXT.keeps(activity)}` });
}

export function decisionOf(f: Finding): Decision {
  return f.kind === "fatal" ? "fatal" : f.kind === "ignored" ? "ignore" : f.kind === "wiped" ? "wipe" : "drop";
}

type MessageEvent = Extract<AguiEvent, { type: EventType.TEXT_MESSAGE_START | EventType.TEXT_MESSAGE_CONTENT | EventType.TEXT_MESSAGE_END | EventType.REASONING_MESSAGE_START | EventType.REASONING_MESSAGE_CONTENT | EventType.REASONING_MESSAGE_END }>;
const isMessageEvent = (e: AguiEvent): e is MessageEvent => MESSAGE_EVENTS.has(e.type);

/**
 * The text and reasoning events the client warns on and drops because of an
 * activity: an id that names an activity message (ids are unique across
 * activity and text messages), or, for content and end, no message at all
 * (its start was dropped, or a MESSAGES_SNAPSHOT removed it).
 */
export function messageClash(messages: Messages, event: AguiEvent, at: At): Finding | undefined {
  if (!isMessageEvent(event)) return undefined;
  const id = event.messageId;
  const role = messages.role(id);
  if (role === "activity") return finding(at, "dropped", TEXT.activityIdClash(id, event.type.startsWith("TEXT")));
  if (role === undefined && event.type !== EventType.TEXT_MESSAGE_START && event.type !== EventType.REASONING_MESSAGE_START) return finding(at, "dropped", TEXT.unknownMessage(id));
  return undefined;
}
