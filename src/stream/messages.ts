import { EventType, type Event as AguiEvent, type Message, type MessagesSnapshotEvent, type ToolCallStartEvent } from "@ag-ui/core";
import { isObject, type JsonObject } from "../core/index.js";
import { Recent } from "./recent.js";

/**
 * The client's messages, as far as activities need them: @ag-ui/client
 * 1.0.0's defaultApplyEvents keeps one array of messages, and an
 * ACTIVITY_SNAPSHOT or ACTIVITY_DELTA finds its target there by `messageId`
 * (the first message with that id). This keeps, per id, the role of that
 * first message, and for an activity its type and content: what decides
 * whether an activity event applies, is ignored, or is warned about.
 */

export interface Activity {
  activityType: string;
  content: JsonObject;
}

type Msg = { role: "activity"; activity: Activity } | { role: string; activity?: undefined };

/** The client's `authoritativeActivityTypes` (src/activity-history.ts): which activity types a MESSAGES_SNAPSHOT owns. */
function authoritativeActivityTypes(event: MessagesSnapshotEvent): string[] | null | undefined {
  const metadata: unknown = event.metadata;
  if (!isObject(metadata) || !Object.prototype.hasOwnProperty.call(metadata, "@ag-ui/client")) return undefined;
  const value = metadata["@ag-ui/client"];
  if (!isObject(value)) return [];
  if (!Object.prototype.hasOwnProperty.call(value, "authoritativeActivityTypes")) return undefined;
  const types = value["authoritativeActivityTypes"];
  if (types === null) return null;
  return Array.isArray(types) && types.every((t) => typeof t === "string") ? (types as string[]) : [];
}

export class Messages {
  /** Activities, in the order the client holds them: part of the mirror, never forgotten. */
  readonly activities = new Map<string, Activity>();
  /** The role of every other message, as long as the limit lets it be remembered (see Recent). */
  private readonly others: Recent<string, string>;
  /** Tool calls the client holds, so a repeated TOOL_CALL_START creates no message. */
  private readonly toolCallIds: Recent<string, true>;

  /** `limit`: how many ids of messages other than activities to remember (fix's bound on memory; check remembers all). */
  constructor(limit = Infinity) {
    this.others = new Recent(limit);
    this.toolCallIds = new Recent(limit);
  }

  /** The role of the message the client finds for `id`, if any. */
  role(id: string): string | undefined {
    return this.activities.has(id) ? "activity" : this.others.get(id);
  }

  activity(id: string): Activity | undefined {
    return this.activities.get(id);
  }

  private has(id: string): boolean {
    return this.activities.has(id) || this.others.has(id);
  }

  private put(id: string, msg: Msg): void {
    if (msg.activity) {
      this.activities.set(id, msg.activity);
      this.others.delete(id);
    } else {
      this.others.set(id, msg.role);
      this.activities.delete(id);
    }
  }

  /** A message pushed only when no message has the id yet (the client's `find` before `push`). */
  private add(id: string, msg: Msg): void {
    if (!this.has(id)) this.put(id, msg);
  }

  /**
   * The client's ACTIVITY_SNAPSHOT: a new id creates the activity; an existing
   * activity is replaced unless `replace` is false; any other message under the
   * id is replaced by the activity unless `replace` is false.
   */
  snapshot(id: string, activityType: string, content: JsonObject, replace: boolean): void {
    if (!this.has(id) || replace) this.put(id, { role: "activity", activity: { activityType, content } });
  }

  /** A patched activity: its new content and the delta's type. */
  patched(id: string, activity: Activity): void {
    this.put(id, { role: "activity", activity });
  }

  /** Everything else that creates messages, as defaultApplyEvents does. */
  observe(event: AguiEvent): void {
    switch (event.type) {
      case EventType.TEXT_MESSAGE_START:
        // An id that names an activity is left alone (the client warns and drops the text).
        this.add(event.messageId, { role: event.role ?? "assistant" });
        return;
      case EventType.REASONING_MESSAGE_START:
        this.add(event.messageId, { role: "reasoning" });
        return;
      case EventType.TOOL_CALL_START:
        return this.toolCallStart(event);
      case EventType.TOOL_CALL_RESULT:
        // Pushed (or spliced after its call) even when the id exists: the first message with the id is unchanged.
        this.add(event.messageId, { role: "tool" });
        return;
      case EventType.RUN_STARTED:
        for (const m of event.input?.messages ?? []) this.addMessage(m);
        return;
      case EventType.MESSAGES_SNAPSHOT:
        return this.messagesSnapshot(event);
      default:
        return;
    }
  }

  /** A message object from history (RUN_STARTED's input), pushed unless its id exists. */
  private addMessage(m: Message): void {
    if (this.has(m.id)) return;
    this.put(m.id, messageOf(m));
    this.toolCallsOf(m);
  }

  private toolCallsOf(m: Message): void {
    if (m.role === "assistant") for (const tc of m.toolCalls ?? []) this.toolCallIds.set(tc.id, true);
  }

  /** resolveOrCreateAssistantMessage: a tool call joins its parent assistant message, or creates one. */
  private toolCallStart(event: ToolCallStartEvent): void {
    const toolCallId = event.toolCallId;
    if (this.toolCallIds.has(toolCallId)) return;
    this.toolCallIds.set(toolCallId, true);
    const parent = event.parentMessageId;
    if (parent) {
      const role = this.role(parent);
      if (role === "assistant") return;
      this.add(role !== undefined ? toolCallId : parent, { role: "assistant" });
    } else this.add(toolCallId, { role: "assistant" });
  }

  /**
   * The client's MESSAGES_SNAPSHOT: messages it names are replaced, messages it
   * leaves out are removed, except client-only activities (unless the snapshot
   * owns their type) and reasoning (unless the snapshot carries reasoning).
   */
  private messagesSnapshot(event: MessagesSnapshotEvent): void {
    const incoming = event.messages;
    const snapshot = new Map<string, Msg>();
    for (const m of incoming) snapshot.set(m.id, messageOf(m));
    const owned = authoritativeActivityTypes(event);
    const hasActivity = incoming.some((m) => m.role === "activity");
    const hasReasoning = incoming.some((m) => m.role === "reasoning");
    const preserved = (m: Msg): boolean =>
      (m.role === "activity" && m.activity !== undefined && (owned ? !owned.includes(m.activity.activityType) : owned !== null && !hasActivity)) || (m.role === "reasoning" && !hasReasoning);
    const before: [string, Msg][] = [...[...this.activities].map(([id, activity]): [string, Msg] => [id, { role: "activity", activity }]), ...[...this.others].map(([id, role]): [string, Msg] => [id, { role }])];
    this.activities.clear();
    this.others.clear();
    for (const [id, m] of before) {
      const next = snapshot.get(id) ?? (preserved(m) ? m : undefined);
      if (next) this.put(id, next);
    }
    for (const m of incoming) this.add(m.id, snapshot.get(m.id) as Msg);
    for (const m of incoming) this.toolCallsOf(m);
  }
}

function messageOf(m: Message): Msg {
  // The schema holds content to an object: JSON, as parsed.
  if (m.role === "activity") return { role: m.role, activity: { activityType: m.activityType, content: m.content as JsonObject } };
  return { role: m.role };
}
