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

import { Recent } from "./recent.js";

type Ev = Record<string, unknown>;
interface Owner {
  sub: string | undefined;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** Why verifyEvents refuses an event: a code (§13) and the client's own message. */
export interface LifecycleBreak {
  code: "FIRST_EVENT" | "AFTER_RUN_FINISHED" | "AFTER_RUN_ERROR" | "LIFECYCLE";
  message: string;
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

  private newOwners(): Lifecycle["owners"] {
    return { message: new Recent(this.limit), toolCall: new Recent(this.limit), activity: new Recent(this.limit), reasoning: new Recent(this.limit) };
  }

  /**
   * What verifyEvents would do with `event` (already through the schema),
   * without changing anything: for an event that may never reach the client
   * (a delta `fix` drops), so it must not count as the first event either.
   */
  peek(event: Ev): LifecycleBreak | undefined {
    const first = this.firstEventReceived;
    const e = this.step(event, false);
    this.firstEventReceived = first;
    return e;
  }

  /** Feeds one event through the state machine; a break is what the client would throw. */
  feed(event: Ev): LifecycleBreak | undefined {
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
  private tagError(type: string, tag: string | undefined, owner: Owner | undefined, kind: string, id: string): LifecycleBreak | undefined {
    if (tag === undefined || !owner || owner.sub === tag) return undefined;
    return broken(`Cannot send '${type}': subagentRunId '${tag}' does not match the ${kind} '${id}' opener's subagent '${owner.sub ?? "(the parent agent)"}'.`);
  }

  /** verifyEvents seeds owners from replayed history (MESSAGES_SNAPSHOT authoritatively, RUN_STARTED's input not). */
  private seed(messages: unknown, authoritative: boolean): void {
    if (!Array.isArray(messages)) return;
    for (const m of messages as Ev[]) {
      if (!m || typeof m["id"] !== "string") continue;
      const id = m["id"];
      const sub = str(m["subagentRunId"]);
      const bucket = m["role"] === "reasoning" ? this.owners.reasoning : m["role"] === "activity" ? this.owners.activity : this.owners.message;
      if (authoritative || !bucket.has(id)) bucket.set(id, { sub });
      const calls = m["toolCalls"];
      if (!Array.isArray(calls)) continue;
      for (const tc of calls as Ev[]) {
        if (tc && typeof tc["id"] === "string" && (authoritative || !this.owners.toolCall.has(tc["id"]))) this.owners.toolCall.set(tc["id"], { sub });
      }
    }
  }

  private step(event: Ev, commit: boolean): LifecycleBreak | undefined {
    const type = event["type"] as string;
    if (this.runError && type !== "RUN_STARTED") {
      return { code: "AFTER_RUN_ERROR", message: `Cannot send event type '${type}': The run has already errored with 'RUN_ERROR'. No further events can be sent.` };
    }
    if (this.runFinished && type !== "RUN_ERROR" && type !== "RUN_STARTED") {
      return { code: "AFTER_RUN_FINISHED", message: `Cannot send event type '${type}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'.` };
    }
    if (!this.firstEventReceived) {
      this.firstEventReceived = true;
      if (type !== "RUN_STARTED" && type !== "RUN_ERROR") return { code: "FIRST_EVENT", message: "First event must be 'RUN_STARTED'" };
    } else if (type === "RUN_STARTED") {
      if (this.runStarted && !this.runFinished && !this.runError) {
        return broken("Cannot send 'RUN_STARTED' while a run is still active. The previous run must be finished with 'RUN_FINISHED' before starting a new run.");
      }
      if (commit && (this.runFinished || this.runError)) this.reset();
    }
    // Only RUN_STARTED mutates before its last check (above); every other
    // mutation below happens on the way out, so a peek stops short of it.
    return this.check(event, type, commit);
  }

  private check(event: Ev, type: string, commit: boolean): LifecycleBreak | undefined {
    const tag = str(event["subagentRunId"]);
    const id = str(event["messageId"]) as string;
    const o = this.owners;
    switch (type) {
      case "TEXT_MESSAGE_START": {
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
      case "TEXT_MESSAGE_CONTENT":
      case "TEXT_MESSAGE_END": {
        if (!this.activeMessages.has(id)) {
          return broken(type === "TEXT_MESSAGE_END" ? `Cannot send 'TEXT_MESSAGE_END' event: No active text message found with ID '${id}'. A 'TEXT_MESSAGE_START' event must be sent first.` : `Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found with ID '${id}'. Start a text message with 'TEXT_MESSAGE_START' first.`);
        }
        const e = this.tagError(type, tag, o.message.get(id), "message", id);
        if (e) return e;
        if (commit && type === "TEXT_MESSAGE_END") this.activeMessages.delete(id);
        return undefined;
      }
      case "TOOL_CALL_START":
        return this.toolCallStart(event, tag, commit);
      case "TOOL_CALL_ARGS":
      case "TOOL_CALL_END": {
        const tc = event["toolCallId"] as string;
        if (!this.activeToolCalls.has(tc)) {
          return broken(type === "TOOL_CALL_END" ? `Cannot send 'TOOL_CALL_END' event: No active tool call found with ID '${tc}'. A 'TOOL_CALL_START' event must be sent first.` : `Cannot send 'TOOL_CALL_ARGS' event: No active tool call found with ID '${tc}'. Start a tool call with 'TOOL_CALL_START' first.`);
        }
        const e = this.tagError(type, tag, o.toolCall.get(tc), "tool call", tc);
        if (e) return e;
        if (commit && type === "TOOL_CALL_END") this.activeToolCalls.delete(tc);
        return undefined;
      }
      case "STEP_STARTED": {
        const name = event["stepName"] as string;
        if (this.stepsFor(tag).has(name)) return broken(`Step "${name}" is already active for 'STEP_STARTED'${tag !== undefined ? ` in subagent '${tag}'` : ""}`);
        if (commit) this.stepsFor(tag).add(name);
        return undefined;
      }
      case "STEP_FINISHED": {
        const name = event["stepName"] as string;
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
      case "ACTIVITY_SNAPSHOT":
        // Only a replacing snapshot (or a first one) re-owns the activity.
        if (commit && (!o.activity.has(id) || event["replace"] !== false)) o.activity.set(id, { sub: tag });
        return undefined;
      case "ACTIVITY_DELTA":
        return this.tagError(type, tag, o.activity.get(id), "activity", id);
      case "TOOL_CALL_RESULT":
        if (commit && typeof event["messageId"] === "string") o.message.set(id, { sub: tag });
        return undefined;
      case "REASONING_START":
      case "REASONING_MESSAGE_START":
        return this.reasoningStart(type, id, tag, commit);
      case "REASONING_MESSAGE_CONTENT":
      case "REASONING_MESSAGE_END":
      case "REASONING_END": {
        const span = type === "REASONING_END";
        const open = span ? this.activeReasoningSpans : this.activeReasoningMessages;
        if (!open.has(id)) {
          return broken(span ? `Cannot send 'REASONING_END' event: No active reasoning span found with ID '${id}'. A 'REASONING_START' event must be sent first.` : `Cannot send '${type}' event: No active reasoning message found with ID '${id}'. Start a reasoning message with 'REASONING_MESSAGE_START' first.`);
        }
        const e = this.tagError(type, tag, o.reasoning.get(id), "reasoning message", id);
        if (e) return e;
        if (commit && type !== "REASONING_MESSAGE_CONTENT") open.delete(id);
        return undefined;
      }
      case "REASONING_ENCRYPTED_VALUE": {
        const entity = event["entityId"] as string;
        const sub = event["subtype"];
        const owner = sub === "tool-call" ? o.toolCall.get(entity) : sub === "message" ? (o.message.get(entity) ?? o.reasoning.get(entity)) : o.reasoning.get(entity);
        return this.tagError(type, tag, owner, sub === "tool-call" ? "tool call" : sub === "message" ? "message" : "reasoning message", entity);
      }
      case "SUBAGENT_STARTED":
        return this.subagentStarted(event, tag as string, commit);
      case "SUBAGENT_FINISHED":
      case "SUBAGENT_ERROR": {
        const sub = tag as string;
        if (!this.activeSubagents.has(sub)) return broken(`Cannot send '${type}': no active subagent found with ID '${sub}'. A 'SUBAGENT_STARTED' event must be sent first.`);
        if (commit) {
          this.activeSubagents.delete(sub);
          this.closedSubagents.add(sub);
        }
        return undefined;
      }
      case "MESSAGES_SNAPSHOT":
        if (commit) this.seed(event["messages"], true);
        return undefined;
      case "RUN_STARTED":
        if (commit) {
          this.runStarted = true;
          this.seed((event["input"] as Ev | undefined)?.["messages"], false);
        }
        return undefined;
      case "RUN_FINISHED":
        return this.runFinishedCheck(commit);
      case "RUN_ERROR":
        if (commit) this.runError = true;
        return undefined;
      default:
        return undefined;
    }
  }

  private toolCallStart(event: Ev, tag: string | undefined, commit: boolean): LifecycleBreak | undefined {
    const id = event["toolCallId"] as string;
    if (this.activeToolCalls.has(id)) return broken(`Cannot send 'TOOL_CALL_START' event: A tool call with ID '${id}' is already in progress. Complete it with 'TOOL_CALL_END' first.`);
    const parent = str(event["parentMessageId"]);
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
      const e = this.tagError("TOOL_CALL_START", tag, existing, "tool call", id);
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

  private reasoningStart(type: string, id: string, tag: string | undefined, commit: boolean): LifecycleBreak | undefined {
    const span = type === "REASONING_START";
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

  private subagentStarted(event: Ev, id: string, commit: boolean): LifecycleBreak | undefined {
    const parent = str(event["parentSubagentRunId"]);
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
