import { EventType, type Event as AguiEvent } from "@ag-ui/core";
import { applies, finding, type At, type Reported } from "./findings.js";
import type { Lifecycle, LifecycleBreak } from "./lifecycle.js";
import type { Messages } from "./messages.js";
import { Recent } from "./recent.js";
import type { Tally } from "./tally.js";

/**
 * Lifecycle repair (protocol/README.md §13, the lifecycle's mends; issue 40): before an event goes to the
 * client, what makes the run one @ag-ui/client's verifyEvents accepts, keeping the most of what the
 * server meant. A missing start is sent first; a duplicate end, or anything after RUN_ERROR, is left
 * out; what is open is closed before a run's end; a RUN_FINISHED is held back until the answer ends
 * (or the next run starts), so that what the server sends after it still lands inside the run; a
 * stream that stops inside a run is ended with RUN_ERROR INCOMPLETE_STREAM, as CopilotKit's
 * finalizeRunEvents ends one. Each mend is a finding with outcome mended (something sent or moved) or
 * discarded (left out), whose kind is what the client would have done with the event as sent.
 */

/** What becomes of one event: events sent before it, the held RUN_FINISHED sent or forgotten, the event held or left out. */
export interface Mend {
  before: AguiEvent[];
  /** Send the held RUN_FINISHED now, after `before`. */
  release: boolean;
  /** Forget the held RUN_FINISHED: a RUN_ERROR ended the run instead. */
  forget: boolean;
  /** This event is a RUN_FINISHED: hold it back. */
  hold: boolean;
  /** Leave this event out. */
  drop: boolean;
  findings: Reported[];
}

const NOTHING: Mend = { before: [], release: false, forget: false, hold: false, drop: false, findings: [] };

/** The code a stream that stops inside its run is ended with: CopilotKit's, so that a UI reads both the same. */
export const INCOMPLETE_STREAM = "INCOMPLETE_STREAM";

/** The ids a synthesized RUN_STARTED carries: the request's, or these when it names none. */
export interface RunIds {
  threadId: string;
  runId: string;
}

export class LifecycleRepair {
  /** A RUN_FINISHED held back, with the run's ids, once it came: verifyEvents has not seen it yet. */
  private held: AguiEvent | undefined;
  /** The run's ids, from its RUN_STARTED (what a synthesized RUN_FINISHED carries). */
  private run: RunIds;
  /** Tool call names by id, so that arguments after an end restart the call under its own name. */
  private readonly names: Recent<string, string>;
  /** A late event was already reported for the held RUN_FINISHED. */
  private lateSaid = false;

  constructor(
    private readonly lifecycle: Lifecycle,
    private readonly messages: Messages,
    private readonly tally: Tally,
    ids: RunIds,
    remember: number,
  ) {
    this.run = { ...ids };
    this.names = new Recent(remember);
  }

  /** Before `event` (through the schema) goes on: what the run needs so that the client takes it. */
  mend(event: AguiEvent, at: At): Mend {
    if (event.type === EventType.TOOL_CALL_START) this.names.set(event.toolCallId, event.toolCallName);
    if (event.type === EventType.RUN_STARTED) this.run = { threadId: event.threadId, runId: event.runId };
    if (this.held !== undefined) return this.whileHeld(event, at);
    if (event.type === EventType.RUN_FINISHED) {
      if (this.lifecycle.inRun || !this.lifecycle.started) return this.finish(event, at);
      return this.fix(event, at);
    }
    if (this.lifecycle.peek(event) === undefined) return NOTHING;
    return this.fix(event, at);
  }

  /** The stream ended: the held RUN_FINISHED, after closing what opened since; or, inside a run, its end as an error. */
  end(at: At): Mend {
    if (this.held !== undefined) {
      const before = this.closes();
      this.releaseHeld();
      return { ...NOTHING, before, release: true };
    }
    if (!this.lifecycle.inRun) return NOTHING;
    const before = this.closes();
    const error: AguiEvent = { type: EventType.RUN_ERROR, message: "the stream stopped before its run ended (agui-state ended it)", code: INCOMPLETE_STREAM };
    this.send(error);
    before.push(error);
    // No kind: verifyEvents throws at no event here; the client's run just never ends (§13).
    const f = this.tally.count(applies(at, { code: INCOMPLETE_STREAM, message: "the stream stopped inside its run, with no RUN_FINISHED or RUN_ERROR", hint: "end every run with RUN_FINISHED, or RUN_ERROR when it fails" }, "mended"));
    return { ...NOTHING, before, findings: [f] };
  }

  /** A RUN_FINISHED: what is open is closed before it, and it is held back. */
  private finish(event: AguiEvent, at: At): Mend {
    const findings: Reported[] = [];
    const before: AguiEvent[] = [];
    if (!this.lifecycle.started) before.push(...this.startRun(at, findings));
    const broke = this.lifecycle.peek(event);
    if (broke !== undefined) {
      before.push(...this.closes());
      if (this.lifecycle.peek(event) !== undefined) return this.fix(event, at); // open subagents: nothing the repair can close
      findings.push(this.said(at, broke, "mended", "what was open is closed before the RUN_FINISHED"));
    }
    this.held = event;
    this.lateSaid = false;
    return { ...NOTHING, before, hold: true, findings };
  }

  /** An event while a RUN_FINISHED is held: it goes inside the run; a new run's start sends the held end first. */
  private whileHeld(event: AguiEvent, at: At): Mend {
    if (event.type === EventType.RUN_STARTED) {
      const before = this.closes();
      this.releaseHeld();
      return { ...NOTHING, before, release: true };
    }
    if (event.type === EventType.RUN_FINISHED) return { ...NOTHING, drop: true, findings: [this.said(at, afterFinished(event.type), "discarded", "a run ends once: the second RUN_FINISHED is left out")] };
    if (event.type === EventType.RUN_ERROR) {
      this.held = undefined;
      return { ...NOTHING, forget: true };
    }
    const findings: Reported[] = this.lateSaid ? [] : [this.said(at, afterFinished(event.type), "mended", "the RUN_FINISHED before it is held back and sent when the answer ends, so this stays inside the run")];
    this.lateSaid = true;
    if (this.lifecycle.peek(event) === undefined) return { ...NOTHING, findings };
    const fixed = this.fix(event, at);
    return { ...fixed, findings: [...findings, ...fixed.findings] };
  }

  /** Any other break: a start sent first where one is missing (a run's, then a message's or a call's); otherwise the event is left out. */
  private fix(event: AguiEvent, at: At): Mend {
    const findings: Reported[] = [];
    const before: AguiEvent[] = [];
    let broke = this.lifecycle.peek(event);
    if (broke?.code === "FIRST_EVENT") {
      before.push(...this.startRun(at, findings));
      broke = this.lifecycle.peek(event);
    }
    if (broke?.code === "LIFECYCLE" && event.type === EventType.RUN_STARTED) {
      before.push(...this.closes(), this.finished());
      findings.push(this.said(at, broke, "mended", "the run before it is closed and finished first"));
      broke = this.lifecycle.peek(event);
    } else if (broke?.code === "LIFECYCLE") {
      const start = this.startFor(event);
      if (start !== undefined) {
        this.send(start);
        before.push(start);
        findings.push(this.said(at, broke, "mended", `a ${start.type} is sent before it`));
        broke = this.lifecycle.peek(event);
      }
    }
    if (broke === undefined) return { ...NOTHING, before, findings };
    return { ...NOTHING, before, drop: true, findings: [...findings, this.said(at, broke, "discarded", "it is left out")] };
  }

  /** RUN_STARTED before a stream's first event that is not one. */
  private startRun(at: At, findings: Reported[]): AguiEvent[] {
    const start: AguiEvent = { type: EventType.RUN_STARTED, threadId: this.run.threadId, runId: this.run.runId };
    findings.push(this.said(at, { code: "FIRST_EVENT", message: "First event must be 'RUN_STARTED'" }, "mended", `a RUN_STARTED (thread ${JSON.stringify(this.run.threadId)}, run ${JSON.stringify(this.run.runId)}) is sent before it`));
    this.send(start);
    return [start];
  }

  /** The start a continuation lacks: a text message's, a tool call's, a reasoning message's. */
  private startFor(event: AguiEvent): AguiEvent | undefined {
    switch (event.type) {
      case EventType.TEXT_MESSAGE_CONTENT:
        return { type: EventType.TEXT_MESSAGE_START, messageId: event.messageId, role: "assistant" };
      case EventType.TOOL_CALL_ARGS:
        return { type: EventType.TOOL_CALL_START, toolCallId: event.toolCallId, toolCallName: this.names.get(event.toolCallId) ?? "unknown" };
      case EventType.REASONING_MESSAGE_CONTENT:
        return { type: EventType.REASONING_MESSAGE_START, messageId: event.messageId, role: "reasoning" };
      default:
        return undefined;
    }
  }

  /** The events that close what is open, each fed to the lifecycle as the client will see it. */
  private closes(): AguiEvent[] {
    const out: AguiEvent[] = [];
    for (const end of this.lifecycle.openEnds()) {
      const e: AguiEvent =
        end.type === EventType.TOOL_CALL_END
          ? { type: end.type, toolCallId: end.id }
          : end.type === EventType.STEP_FINISHED
            ? { type: end.type, stepName: end.id, ...(end.sub !== undefined ? { subagentRunId: end.sub } : {}) }
            : end.type === EventType.TEXT_MESSAGE_END
              ? { type: end.type, messageId: end.id }
              : end.type === EventType.REASONING_MESSAGE_END
                ? { type: end.type, messageId: end.id }
                : { type: end.type, messageId: end.id };
      this.send(e);
      out.push(e);
    }
    return out;
  }

  /** A RUN_FINISHED of the current run, sent by the repair. */
  private finished(): AguiEvent {
    const e: AguiEvent = { type: EventType.RUN_FINISHED, threadId: this.run.threadId, runId: this.run.runId };
    this.send(e);
    return e;
  }

  /** The held RUN_FINISHED goes: the client's lifecycle takes it now. */
  private releaseHeld(): void {
    const e = this.held;
    this.held = undefined;
    if (e !== undefined) this.lifecycle.feed(e);
  }

  /** A synthesized event, as the client will take it: its lifecycle and its messages move on. */
  private send(e: AguiEvent): void {
    this.lifecycle.feed(e);
    this.messages.observe(e);
  }

  private said(at: At, broke: LifecycleBreak, outcome: "mended" | "discarded", mend: string): Reported {
    return this.tally.count(finding(at, "fatal", { code: broke.code, message: `verifyEvents fails the run: ${broke.message}`, hint: `lifecycle repair: ${mend}` }, outcome));
  }
}

const afterFinished = (type: string): LifecycleBreak => ({ code: "AFTER_RUN_FINISHED", message: `Cannot send event type '${type}': The run has already finished with 'RUN_FINISHED'. Start a new run with 'RUN_STARTED'.` });

/**
 * The mend, in words, for a break `check` reports (protocol/README.md §13: check names each lifecycle
 * break with what `fix --lifecycle repair`, the default, does about it).
 */
export function mendHint(type: string, code: LifecycleBreak["code"]): string {
  const does = (what: string) => `fix --lifecycle repair ${what}`;
  if (code === "FIRST_EVENT") return does("sends a RUN_STARTED before it");
  if (code === "AFTER_RUN_FINISHED") return does("holds the RUN_FINISHED back until the stream ends, so this stays inside the run");
  if (code === "AFTER_RUN_ERROR") return does("leaves it out");
  switch (type) {
    case EventType.TEXT_MESSAGE_CONTENT:
      return does("sends a TEXT_MESSAGE_START before it");
    case EventType.TOOL_CALL_ARGS:
      return does("sends a TOOL_CALL_START before it");
    case EventType.REASONING_MESSAGE_CONTENT:
      return does("sends a REASONING_MESSAGE_START before it");
    case EventType.RUN_FINISHED:
      return does("closes what is open before it");
    case EventType.RUN_STARTED:
      return does("closes what is open and finishes the run before it");
    default:
      return does("leaves it out");
  }
}
