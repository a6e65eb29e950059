import { defaultApplyEvents, enforceEvents, transformChunks, verifyEvents, type AbstractAgent, type AgentSubscriber, type BaseEvent, type Message } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { Subject, type Subscription } from "rxjs";
import { vi, type MockInstance } from "vitest";
import type { Json, JsonObject } from "../../src/core/index.js";
import { sameJson } from "./json.js";

/**
 * @ag-ui/client 1.0.0 holding a conversation across sidecar calls, for the
 * activity tests (protocol/README.md §10): one run is one long-lived event
 * stream through the pipeline AbstractAgent.runAgent builds (enforceEvents,
 * transformChunks, verifyEvents, then the real defaultApplyEvents), and the
 * mutations it emits are kept as the agent keeps them (messages and state).
 * The client's messages and state therefore carry over from one call's events
 * to the next, and from one run to the next, as they do in a browser.
 *
 * Every event handed to `feed` is first checked against the wire: parsed with
 * @ag-ui/core's EventSchemas and held to the exact shapes of §3 and §10, so a
 * malformed event fails before the client sees it. The library swallows a
 * patch it cannot apply with console.warn (and a subscriber fault with
 * console.error): while a run is open both are captured, and any of them
 * fails the next `feed`.
 */

/** The harness's own marker, sent after each call's events to know the client has applied them. */
const SYNC = "agui-state-test/sync";

/** RFC 6901 pointers as results carry them (§3), never the root (§5 rule 7). */
const POINTER = /^(\/([^~/]|~[01])*)+$/;

const OP_MEMBERS: Record<string, readonly string[]> = {
  add: ["op", "path", "value"],
  remove: ["op", "path"],
  replace: ["op", "path", "value"],
  move: ["op", "from", "path"],
  copy: ["op", "from", "path"],
};

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function checkPatch(where: string, patch: unknown): void {
  if (!Array.isArray(patch)) throw new Error(`${where}: not an array`);
  patch.forEach((op: unknown, i) => {
    if (!isPlainObject(op)) throw new Error(`${where}/${i}: not an object`);
    const members = OP_MEMBERS[op["op"] as string];
    // Events never carry test ops (§3), and members come in RFC 6902's order.
    if (!members) throw new Error(`${where}/${i}: op ${JSON.stringify(op["op"])} has no place in an event`);
    if (JSON.stringify(Object.keys(op)) !== JSON.stringify(members)) throw new Error(`${where}/${i}: members ${JSON.stringify(Object.keys(op))}, expected ${JSON.stringify(members)}`);
    for (const k of ["path", "from"]) if (k in op && !(typeof op[k] === "string" && POINTER.test(op[k]))) throw new Error(`${where}/${i}/${k}: ${JSON.stringify(op[k])} is not a pointer below the root`);
  });
}

/**
 * Throws unless `e` is a well-formed AG-UI 1.0 event of the four kinds the
 * sidecar emits: EventSchemas accepts it, and it has exactly the members of
 * protocol/README.md §3 and §10 (the schemas are loose, so an extra member
 * would pass them; the client's enforceEvents would strip it with a warning).
 */
export function checkWireEvent(e: unknown): void {
  const parsed = EventSchemas.safeParse(e);
  if (!parsed.success) throw new Error(`EventSchemas refused ${JSON.stringify(e).slice(0, 500)}: ${parsed.error.message.slice(0, 1000)}`);
  const ev = e as Record<string, unknown>;
  const keys = Object.keys(ev).sort();
  const want = (...k: string[]): void => {
    if (JSON.stringify(keys) !== JSON.stringify([...k].sort())) throw new Error(`${String(ev["type"])} has members ${JSON.stringify(Object.keys(ev))}, expected ${JSON.stringify(k)}`);
  };
  switch (ev["type"]) {
    case "STATE_SNAPSHOT":
      want("type", "snapshot");
      if (!isPlainObject(ev["snapshot"])) throw new Error("STATE_SNAPSHOT.snapshot is not an object (§11)");
      return;
    case "STATE_DELTA":
      want("type", "delta");
      return checkPatch("STATE_DELTA.delta", ev["delta"]);
    case "ACTIVITY_SNAPSHOT":
      // `replace` travels only when it is false (§10).
      if ("replace" in ev) {
        want("type", "messageId", "activityType", "content", "replace");
        if (ev["replace"] !== false) throw new Error(`ACTIVITY_SNAPSHOT.replace is ${JSON.stringify(ev["replace"])}; only false is sent`);
      } else want("type", "messageId", "activityType", "content");
      if (!isPlainObject(ev["content"])) throw new Error("ACTIVITY_SNAPSHOT.content is not an object");
      return;
    case "ACTIVITY_DELTA":
      want("type", "messageId", "activityType", "patch");
      return checkPatch("ACTIVITY_DELTA.patch", ev["patch"]);
    default:
      throw new Error(`the sidecar emitted an event of type ${JSON.stringify(ev["type"])}`);
  }
}

/** What an activity message looks like on the client after the sidecar's events: nothing more, nothing less. */
export function activityMessage(messageId: string, activityType: string, content: JsonObject): Message {
  return { id: messageId, role: "activity", activityType, content } as Message;
}

interface OpenRun {
  readonly runId: string;
  readonly subject: Subject<BaseEvent>;
  readonly subscription: Subscription;
  readonly done: Promise<void>;
  readonly warn: MockInstance<typeof console.warn>;
  readonly error: MockInstance<typeof console.error>;
  waiting: { token: number; resolve: () => void; reject: (e: Error) => void } | undefined;
  failure: Error | undefined;
}

export class RealClient {
  /** The agent's messages, as AbstractAgent keeps them from the mutations. */
  messages: Message[] = [];
  /** The agent's state. */
  state: Json;
  /** Every console.warn and console.error the library printed while a run was open. */
  readonly complaints: string[] = [];
  /** Events the client was fed, the sidecar's only (the sync markers are not counted). */
  fed = 0;
  private run: OpenRun | undefined;
  private token = 0;

  constructor(
    readonly threadId: string,
    state: JsonObject,
  ) {
    this.state = structuredClone(state);
  }

  /** The activity message the client holds for `messageId`, if any. */
  activity(messageId: string): Message | undefined {
    return this.messages.find((m) => m.id === messageId);
  }

  /**
   * Opens a run: a fresh pipeline over the agent's current messages and state,
   * as runAgent builds one, and RUN_STARTED through it.
   */
  async startRun(runId: string): Promise<void> {
    if (this.run) throw new Error("a run is already open");
    const subject = new Subject<BaseEvent>();
    const input = { threadId: this.threadId, runId, state: structuredClone(this.state), messages: this.messages.filter((m) => m.role !== "activity"), tools: [], context: [], forwardedProps: {} };
    const agent = { messages: this.messages, state: this.state } as unknown as AbstractAgent;
    const warn = vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => void this.complaints.push(`console.warn: ${args.map(String).join(" ").slice(0, 4000)}`));
    const error = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => void this.complaints.push(`console.error: ${args.map(String).join(" ").slice(0, 4000)}`));
    const sync: AgentSubscriber = {
      onCustomEvent: ({ event }) => {
        const w = this.run?.waiting;
        if (event.name === SYNC && w && event.value === w.token) {
          if (this.run) this.run.waiting = undefined;
          w.resolve();
        }
      },
    };
    let finished!: () => void;
    let crashed!: (e: Error) => void;
    const done = new Promise<void>((resolve, reject) => {
      finished = resolve;
      crashed = reject;
    });
    done.catch(() => undefined); // observed through `failure`, and by finishRun
    const events$ = subject.pipe(enforceEvents(), transformChunks(), verifyEvents());
    const subscription = defaultApplyEvents(input as never, events$, agent, [sync]).subscribe({
      next: (m) => {
        // What AbstractAgent.processApplyEvents does with each mutation.
        if (m.messages) this.messages = m.messages;
        if (m.state !== undefined) this.state = m.state as Json;
      },
      error: (e: unknown) => {
        const err = e instanceof Error ? e : new Error(String(e));
        if (this.run) {
          this.run.failure = err;
          this.run.waiting?.reject(err);
        }
        crashed(err);
      },
      complete: () => finished(),
    });
    this.run = { runId, subject, subscription, done, warn, error, waiting: undefined, failure: undefined };
    await this.push([{ type: "RUN_STARTED", threadId: this.threadId, runId } as BaseEvent]);
  }

  /**
   * Feeds one call's events, each checked against the wire first, and
   * resolves once the client has applied them all. Throws on a malformed
   * event, a failed run, or anything the library printed.
   */
  async feed(events: readonly unknown[]): Promise<void> {
    for (const e of events) checkWireEvent(e);
    this.fed += events.length;
    await this.push(structuredClone(events) as BaseEvent[]);
  }

  /** Ends the run with RUN_FINISHED and waits for the pipeline to complete. */
  async finishRun(): Promise<void> {
    const run = this.need();
    try {
      if (run.failure) throw run.failure;
      // Nothing may follow RUN_FINISHED, not even the sync marker: the end of the stream is the sync.
      run.subject.next({ type: "RUN_FINISHED", threadId: this.threadId, runId: run.runId } as BaseEvent);
      run.subject.complete();
      await run.done;
      this.complain();
    } finally {
      this.close();
    }
  }

  /** Drops an open run without finishing it (after a test failed). */
  close(): void {
    const run = this.run;
    if (!run) return;
    this.run = undefined;
    run.subscription.unsubscribe();
    run.warn.mockRestore();
    run.error.mockRestore();
  }

  private need(): OpenRun {
    if (!this.run) throw new Error("no run is open: call startRun first");
    return this.run;
  }

  private complain(): void {
    if (this.complaints.length) throw new Error(`@ag-ui/client complained:\n${this.complaints.join("\n")}`);
  }

  private async push(events: readonly BaseEvent[]): Promise<void> {
    const run = this.need();
    if (run.failure) throw run.failure;
    const token = ++this.token;
    const applied = new Promise<void>((resolve, reject) => {
      run.waiting = { token, resolve, reject };
    });
    for (const e of events) run.subject.next(e);
    run.subject.next({ type: "CUSTOM", name: SYNC, value: token } as BaseEvent);
    await applied;
    this.complain();
  }
}

/** Whether the client's message for an activity is exactly what getActivity reports. */
export function holdsActivity(client: RealClient, messageId: string, activityType: string, content: JsonObject): boolean {
  return sameJson(client.activity(messageId), activityMessage(messageId, activityType, content));
}
