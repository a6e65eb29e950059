/**
 * The run lifecycle exactly as @ag-ui/client 1.0.0's `verifyEvents` enforces
 * it (src/verify/verify.ts in the package's sources): a port of its state
 * machine. Any rule it breaks fails the client's whole run, so each is a
 * `fatal` finding (protocol/README.md §13).
 *
 * The port keeps the stateful rules only. The client's shape checks that
 * precede them (a `subagentRunId: null`, a SUBAGENT_* event without its id or
 * name, a malformed `outcome`) guard in-process producers that bypass the
 * schema; a stream always passes the schema first (schema.ts), which rejects
 * every one of those shapes, so they cannot fire here.
 */

import { EventType, type Event as AguiEvent, type Message } from "@ag-ui/core";
import { Recent } from "./recent.js";

interface Owner {
  sub: string | undefined;
}

/** The subagent an event is attributed to: RUN_* events carry none. */
const tagOf = (event: AguiEvent): string | undefined => ("subagentRunId" in event ? event.subagentRunId : undefined);

/** Why verifyEvents refuses an event: a code (§13) and the client's own message. */
export interface LifecycleBreak {
  code: "FIRST_EVENT" | "AFTER_RUN_FINISHED" | "AFTER_RUN_ERROR" | "LIFECYCLE";
  message: string;
}

/** Something open in a run, by the event that closes it: a tool call, a text or reasoning message, a reasoning span, a step (by name, with its subagent). */
export interface OpenEnd {
  type: EventType.TOOL_CALL_END | EventType.TEXT_MESSAGE_END | EventType.REASONING_MESSAGE_END | EventType.REASONING_END | EventType.STEP_FINISHED;
  id: string;
  sub?: string;
}

const broken = (message: string): LifecycleBreak => ({ code: "LIFECYCLE", message });

export class Lifecycle {
  // Per run, made anew at each run rather than cleared: V8 gives a cleared Map or Set that has
  // moved to the old generation its new table there too, so clearing them run after run would
  // fill the old generation with garbage that only a full collection frees (fix's flat memory).
  private activeMessages = new Set<string>();
  private activeToolCalls = new Set<string>();
  private activeReasoningSpans = new Set<string>();
  private activeReasoningMessages = new Set<string>();
  /** Owners of every entity of the run, as long as the limit lets them be remembered (see Recent). */
  private owners: Record<"message" | "toolCall" | "activity" | "reasoning", Recent<string, Owner>>;
  /** Open steps by owner (undefined: the parent agent), then by name. */
  private steps = new Map<string | undefined, Set<string>>();
  private activeSubagents = new Set<string>();
  private closedSubagents = new Set<string>();
  private runFinished = false;
  private runError = false;
  private firstEventReceived = false;
  private runStarted = false;

  /** `limit`: how many owners of each kind to remember (fix's bound on memory; check remembers all). */
  constructor(private readonly limit = Infinity) {
    this.owners = this.newOwners();
  }

  /** Whether a run is going on: started, and neither finished nor errored (what a cut stream leaves open). */
  get inRun(): boolean {
    return this.runStarted && !this.runFinished && !this.runError;
  }

  /** Whether the stream's first event came (a missing RUN_STARTED can only be put before it). */
  get started(): boolean {
    return this.firstEventReceived;
  }

  /**
   * What the run holds open, innermost first: what a RUN_FINISHED or a RUN_ERROR the repair sends must
   * close first (protocol/README.md §13, the lifecycle's mends), as the events that close each.
   */
  openEnds(): OpenEnd[] {
    // Subagents are not closed: their end carries an outcome the repair cannot know.
    const out: OpenEnd[] = [];
    for (const id of this.activeToolCalls) out.push({ type: EventType.TOOL_CALL_END, id });
    for (const id of this.activeMessages) out.push({ type: EventType.TEXT_MESSAGE_END, id });
    for (const id of this.activeReasoningMessages) out.push({ type: EventType.REASONING_MESSAGE_END, id });
    for (const id of this.activeReasoningSpans) out.push({ type: EventType.REASONING_END, id });
    for (const [owner, names] of this.steps) for (const name of names) out.push({ type: EventType.STEP_FINISHED, id: name, ...(owner !== undefined ? { sub: owner } : {}) });
    return out;
  }

  private newOwners(): Lifecycle["owners"] {
    return { message: new Recent(this.limit), toolCall: new Recent(this.limit), activity: new Recent(this.limit), reasoning: new Recent(this.limit) };
  }

  /**
   * What verifyEvents would do with `event` (already through the schema),
   * without changing anything: for an event that may never reach the client
   * (a delta `fix` drops), so it must not count as the first event either.
   */
  peek(event: AguiEvent): LifecycleBreak | undefined {
    const first = this.firstEventReceived;
    const e = this.step(event, false);
    this.firstEventReceived = first;
    return e;
  }

  /** Feeds one event through the state machine; a break is what the client would throw. */
  feed(event: AguiEvent): LifecycleBreak | undefined {
    return this.step(event, true);
  }

  private reset(): void {
    this.activeMessages = new Set();
    this.activeToolCalls = new Set();
    this.activeReasoningSpans = new Set();
    this.activeReasoningMessages = new Set();
    this.activeSubagents = new Set();
    this.closedSubagents = new Set();
    this.owners = this.newOwners();
    this.steps = new Map();
    this.runFinished = false;
    this.runError = false;
    this.runStarted = true;
  }

  private stepsFor(owner: string | undefined): Set<string> {
    let s = this.steps.get(owner);
    if (!s) this.steps.set(owner, (s = new Set()));
    return s;
  }

  /** A continuation whose subagent tag disagrees with its opener's (an absent tag always agrees). */
  private tagError(type: EventType, tag: string | undefined, owner: Owner | undefined, kind: string, id: string): LifecycleBreak | undefined {
    if (tag === undefined || !owner || owner.sub === tag) return undefined;
    return broken(`Cannot send '${type}': subagentRunId '${tag}' does not match the ${kind} '${id}' opener's subagent '${owner.sub ?? "(the parent agent)"}'.`);
  }

  /** verifyEvents seeds owners from replayed history (MESSAGES_SNAPSHOT authoritatively, RUN_STARTED's input not). */
  private seed(messages: readonly Message[] | undefined, authoritative: boolean): void {
    if (messages === undefined) return;
    for (const m of messages) {
      const id = m.id;
      const sub = m.subagentRunId;
      const bucket = m.role === "reasoning" ? this.owners.reasoning : m.role === "activity" ? this.owners.activity : this.owners.message;
      if (authoritative || !bucket.has(id)) bucket.set(id, { sub });
      if (m.role !== "assistant" || m.toolCalls === undefined) continue;
      for (const tc of m.toolCalls) if (authoritative || !this.owners.toolCall.has(tc.id)) this.owners.toolCall.set(tc.id, { sub });
    }
  }

  private step(event: AguiEvent, commit: boolean): LifecycleBreak | undefined {
    const type = event.type;
    if (this.runError && type !== EventType.RUN_STARTED) {
      return { code: "AFTER_RUN_ERROR", message: `Cannot send event type '${type}': The run has already errored with 'RUN_ERROR'. No further events can be sent.` };
    }
    if (this.runFinished && type !== EventType.RUN_ERROR && type !== EventType.RUN_STARTED) {
      return { code: "AFTER_RUN_FINISHED", message: `Cannot send event type '${type}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'.` };
    }
    if (!this.firstEventReceived) {
      this.firstEventReceived = true;
      if (type !== EventType.RUN_STARTED && type !== EventType.RUN_ERROR) return { code: "FIRST_EVENT", message: "First event must be 'RUN_STARTED'" };
    } else if (type === EventType.RUN_STARTED) {
      if (this.runStarted && !this.runFinished && !this.runError) {
        return broken("Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.");
      }
      if (commit && (this.runFinished || this.runError)) this.reset();
    }
    // Only RUN_STARTED mutates before its last check (above); every other
    // mutation below happens on the way out, so a peek stops short of it.
    return this.check(event, commit);
  }

  private check(event: AguiEvent, commit: boolean): LifecycleBreak | undefined {
    const tag = tagOf(event);
    const o = this.owners;
    const type = event.type;
    switch (event.type) {
      case EventType.TEXT_MESSAGE_START: {
        const id = event.messageId;
        if (this.activeMessages.has(id)) return broken(`Cannot send 'TEXT_MESSAGE_START' event: A text message with ID '${id}' is already in progress. Complete it with 'TEXT_MESSAGE_END' first.`);
        const owner = o.message.get(id);
        const e = owner && this.tagError(type, tag, owner, "message", id);
        if (e) return e;
        if (commit) {
          this.activeMessages.add(id);
          if (!owner) o.message.set(id, { sub: tag });
        }
        return undefined;
      }
      case EventType.TEXT_MESSAGE_CONTENT:
      case EventType.TEXT_MESSAGE_END: {
        const id = event.messageId;
        if (!this.activeMessages.has(id)) {
          return broken(type === EventType.TEXT_MESSAGE_END ? `Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID '${id}'. A 'TEXT_MESSAGE_START' event must be sent first.` : `Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID '${id}'. Start a text message with 'TEXT_MESSAGE_START' first.`);
        }
        const e = this.tagError(type, tag, o.message.get(id), "message", id);
        if (e) return e;
        if (commit && type === EventType.TEXT_MESSAGE_END) this.activeMessages.delete(id);
        return undefined;
      }
      case EventType.TOOL_CALL_START:
        return this.toolCallStart(event.toolCallId, event.parentMessageId, tag, commit);
      case EventType.TOOL_CALL_ARGS:
      case EventType.TOOL_CALL_END: {
        const tc = event.toolCallId;
        if (!this.activeToolCalls.has(tc)) {
          return broken(type === EventType.TOOL_CALL_END ? `Cannot send 'TOOL_CALL_END' event: No active tool call found with ID '${tc}'. A 'TOOL_CALL_START' event must be sent first.` : `Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID '${tc}'. Start a tool call with 'TOOL_CALL_START' first.`);
        }
        const e = this.tagError(type, tag, o.toolCall.get(tc), "tool call", tc);
        if (e) return e;
        if (commit && type === EventType.TOOL_CALL_END) this.activeToolCalls.delete(tc);
        return undefined;
      }
      case EventType.STEP_STARTED: {
        const name = event.stepName;
        if (this.stepsFor(tag).has(name)) return broken(`Step "${name}" is already active for 'STEP_STARTED'${tag !== undefined ? ` in subagent '${tag}'` : ""}`);
        if (commit) this.stepsFor(tag).add(name);
        return undefined;
      }
      case EventType.STEP_FINISHED: {
        const name = event.stepName;
        if (!this.stepsFor(tag).has(name)) {
          for (const [owner, names] of this.steps) {
            if (owner !== tag && names.has(name)) {
              return broken(`Cannot send 'STEP_FINISHED' for step "${name}" attributed to ${tag !== undefined ? `subagent '${tag}'` : "the parent agent"}: that step is open under ${owner !== undefined ? `subagent '${owner}'` : "the parent agent"}. A step must be finished by whoever started it.`);
            }
          }
          return broken(`Cannot send 'STEP_FINISHED' for step "${name}" that was not started`);
        }
        if (commit) this.stepsFor(tag).delete(name);
        return undefined;
      }
      case EventType.ACTIVITY_SNAPSHOT:
        // Only a replacing snapshot (or a first one) re-owns the activity.
        if (commit && (!o.activity.has(event.messageId) || event.replace !== false)) o.activity.set(event.messageId, { sub: tag });
        return undefined;
      case EventType.ACTIVITY_DELTA:
        return this.tagError(type, tag, o.activity.get(event.messageId), "activity", event.messageId);
      case EventType.TOOL_CALL_RESULT:
        if (commit) o.message.set(event.messageId, { sub: tag });
        return undefined;
      case EventType.REASONING_START:
      case EventType.REASONING_MESSAGE_START:
        return this.reasoningStart(type, event.messageId, tag, commit);
      case EventType.REASONING_MESSAGE_CONTENT:
      case EventType.REASONING_MESSAGE_END:
      case EventType.REASONING_END: {
        const id = event.messageId;
        const span = type === EventType.REASONING_END;
        const open = span ? this.activeReasoningSpans : this.activeReasoningMessages;
        if (!open.has(id)) {
          return broken(span ? `Cannot send 'REASONING_END' event: No active reasoning span found with ID '${id}'. A 'REASONING_START' event must be sent first.` : `Cannot send '${type}' event: No active reasoning message found with ID '${id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first.`);
        }
        const e = this.tagError(type, tag, o.reasoning.get(id), "reasoning message", id);
        if (e) return e;
        if (commit && type !== EventType.REASONING_MESSAGE_CONTENT) open.delete(id);
        return undefined;
      }
      case EventType.REASONING_ENCRYPTED_VALUE: {
        const entity = event.entityId;
        const sub = event.subtype;
        const owner = sub === "tool-call" ? o.toolCall.get(entity) : sub === "message" ? (o.message.get(entity) ?? o.reasoning.get(entity)) : o.reasoning.get(entity);
        return this.tagError(type, tag, owner, sub === "tool-call" ? "tool call" : sub === "message" ? "message" : "reasoning message", entity);
      }
      case EventType.SUBAGENT_STARTED:
        return this.subagentStarted(event.subagentRunId, event.parentSubagentRunId, commit);
      case EventType.SUBAGENT_FINISHED:
      case EventType.SUBAGENT_ERROR: {
        const sub = event.subagentRunId;
        if (!this.activeSubagents.has(sub)) return broken(`Cannot send '${type}': no active subagent found with ID '${sub}'. A 'SUBAGENT_STARTED' event must be sent first.`);
        if (commit) {
          this.activeSubagents.delete(sub);
          this.closedSubagents.add(sub);
        }
        return undefined;
      }
      case EventType.MESSAGES_SNAPSHOT:
        if (commit) this.seed(event.messages, true);
        return undefined;
      case EventType.RUN_STARTED:
        if (commit) {
          this.runStarted = true;
          this.seed(event.input?.messages, false);
        }
        return undefined;
      case EventType.RUN_FINISHED:
        return this.runFinishedCheck(commit);
      case EventType.RUN_ERROR:
        if (commit) this.runError = true;
        return undefined;
      default:
        return undefined;
    }
  }

  private toolCallStart(id: string, parent: string | undefined, tag: string | undefined, commit: boolean): LifecycleBreak | undefined {
    if (this.activeToolCalls.has(id)) return broken(`Cannot send 'TOOL_CALL_START' event: A tool call with ID '${id}' is already in progress. Complete it with 'TOOL_CALL_END' first.`);
    let inherited: Owner | undefined;
    if (parent !== undefined) {
      const po = this.owners.message.get(parent);
      if (po) {
        if (tag !== undefined && tag !== po.sub) return broken(`Cannot send 'TOOL_CALL_START': subagentRunId '${tag}' does not match its parent message '${parent}' owner '${po.sub ?? "(the parent agent)"}'. A tool call belongs to the message that carries it.`);
        inherited = po;
      }
    }
    const existing = this.owners.toolCall.get(id);
    if (existing) {
      const e = this.tagError(EventType.TOOL_CALL_START, tag, existing, "tool call", id);
      if (e) return e;
      if (tag === undefined && inherited && inherited.sub !== existing.sub) {
        return broken(`Cannot send 'TOOL_CALL_START': tool call '${id}' is owned by '${existing.sub ?? "(the parent agent)"}' but its parent message '${parent}' is owned by '${inherited.sub ?? "(the parent agent)"}'. A tool call belongs to the message that carries it.`);
      }
    }
    if (commit) {
      this.activeToolCalls.add(id);
      if (!existing) this.owners.toolCall.set(id, tag !== undefined ? { sub: tag } : (inherited ?? { sub: undefined }));
    }
    return undefined;
  }

  private reasoningStart(type: EventType, id: string, tag: string | undefined, commit: boolean): LifecycleBreak | undefined {
    const span = type === EventType.REASONING_START;
    const open = span ? this.activeReasoningSpans : this.activeReasoningMessages;
    if (open.has(id)) {
      return broken(span ? `Cannot send 'REASONING_START' event: A reasoning span with ID '${id}' is already in progress. Complete it with 'REASONING_END' first.` : `Cannot send 'REASONING_MESSAGE_START' event: A reasoning message with ID '${id}' is already in progress. Complete it with 'REASONING_MESSAGE_END' first.`);
    }
    const owner = this.owners.reasoning.get(id);
    const e = owner && this.tagError(type, tag, owner, "reasoning message", id);
    if (e) return e;
    if (commit) {
      open.add(id);
      if (!owner) this.owners.reasoning.set(id, { sub: tag });
    }
    return undefined;
  }

  private subagentStarted(id: string, parent: string | undefined, commit: boolean): LifecycleBreak | undefined {
    if (this.activeSubagents.has(id)) return broken(`Cannot send 'SUBAGENT_STARTED': subagent '${id}' is already active. Finish it with 'SUBAGENT_FINISHED' first.`);
    if (this.closedSubagents.has(id)) return broken(`Cannot send 'SUBAGENT_STARTED': subagent '${id}' has already finished in this run. Subagent IDs are per-invocation and cannot be reused.`);
    if (parent !== undefined && !this.activeSubagents.has(parent) && !this.closedSubagents.has(parent)) return broken(`Cannot send 'SUBAGENT_STARTED': parentSubagentRunId '${parent}' has not been started in this run.`);
    if (commit) this.activeSubagents.add(id);
    return undefined;
  }

  private runFinishedCheck(commit: boolean): LifecycleBreak | undefined {
    const open: string[] = [];
    for (const [owner, names] of this.steps) for (const n of names) open.push(owner !== undefined ? `${n} (subagent '${owner}')` : n);
    if (open.length) return broken(`Cannot send 'RUN_FINISHED' while steps are still active: ${open.join(", ")}`);
    const pending: [Set<string>, string][] = [
      [this.activeMessages, "text messages"],
      [this.activeReasoningMessages, "reasoning messages"],
      [this.activeReasoningSpans, "reasoning spans"],
      [this.activeToolCalls, "tool calls"],
      [this.activeSubagents, "subagents"],
    ];
    for (const [set, what] of pending) if (set.size > 0) return broken(`Cannot send 'RUN_FINISHED' while ${what} are still active: ${[...set].join(", ")}`);
    if (commit) this.runFinished = true;
    return undefined;
  }
}
