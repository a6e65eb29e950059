import { EventType, type Event as AguiEvent } from "@ag-ui/core";
import type { Json } from "../core/index.js";
import { INHERITS, TEXT, finding, inherited, patchVerdict, type At, type Finding, type OpFinding, type Outcome, type Reader } from "./findings.js";
import type { Messages } from "./messages.js";
import type { Indexed, Normalized } from "./mirror.js";
import type { Decision } from "./stages.js";

/** The apply stage's verdicts on one event, shared by its two forms (client-apply.ts, repair-apply.ts). */

const MESSAGE_EVENTS: ReadonlySet<string> = new Set([EventType.TEXT_MESSAGE_START, EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END, EventType.REASONING_MESSAGE_START, EventType.REASONING_MESSAGE_CONTENT, EventType.REASONING_MESSAGE_END]);

/**
 * What fix did with the op a verdict names: not sent, or sent in a delta fix
 * rewrote (the client would have dropped the delta as sent, so whatever went
 * out of it went mended).
 */
export function outcomeOf(f: Finding, r: Normalized, sent: boolean, valid: readonly Indexed[]): Outcome {
  if (!sent) return "discarded";
  if (f.index === undefined) return "mended";
  const index = f.index;
  // Left out before normalizing (the schema stage's), or skipped by it.
  return !valid.some((v) => v.index === index) || r.skips.some((s) => s.index === index) ? "discarded" : "mended";
}

/** The finding for a delta the client would drop: fast-json-patch's verdict on it. */
export function verdict(root: Json, patch: readonly unknown[], at: At, activity: boolean, kept: number[] | undefined, reader: Reader): Finding | undefined {
  const f = patchVerdict(root, patch, (i) => (kept ? (kept[i] ?? i) : i), reader);
  if (f === INHERITS) return finding(at, activity ? "dropped" : "fatal", inherited(activity));
  return f && dropped(at, f, activity);
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
