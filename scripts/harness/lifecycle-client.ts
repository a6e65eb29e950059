import { HttpAgent, defaultApplyEvents, enforceEvents, verifyEvents, type AbstractAgent, type BaseEvent, type Message } from "@ag-ui/client";
import { from } from "rxjs";
import type { JsonObject } from "../../src/core/index.js";

/**
 * The real @ag-ui/client on a stream held in memory, two ways, with no
 * server: `replay` feeds events as an rxjs Observable through the stages
 * runAgent puts before its reducer that can refuse an event (enforceEvents,
 * verifyEvents) and then defaultApplyEvents; `runHttp` is HttpAgent.runAgent
 * itself, its fetch answering with the given SSE text. What the client prints
 * (a dropped patch's warning, "Agent execution failed") is silenced here:
 * these report what it did, and callers assert on that.
 */

export interface Input {
  threadId: string;
  runId: string;
  state: JsonObject;
}

export interface Replayed {
  /** What the pipeline failed with (a verifyEvents or schema error), if it did. */
  error: Error | undefined;
  messages: Message[];
  state: unknown;
}

/** Runs that silence the console now; the console is restored when the last of them ends (they may overlap). */
let silencing = 0;
const loud = { warn: console.warn, error: console.error };

async function silenced<T>(f: () => Promise<T>): Promise<T> {
  if (silencing++ === 0) {
    Object.assign(loud, { warn: console.warn, error: console.error });
    console.warn = () => undefined;
    console.error = () => undefined;
  }
  try {
    return await f();
  } finally {
    if (--silencing === 0) Object.assign(console, loud);
  }
}

export function replay(input: Input, events: readonly JsonObject[]): Promise<Replayed> {
  return silenced(
    () =>
      new Promise<Replayed>((resolve) => {
        const out: Replayed = { error: undefined, messages: [], state: structuredClone(input.state) };
        const runInput = { ...input, state: structuredClone(input.state), messages: [], tools: [], context: [], forwardedProps: {} };
        const agent = { messages: [], state: structuredClone(input.state) } as unknown as AbstractAgent;
        const events$ = from(events as unknown as BaseEvent[]).pipe(enforceEvents(), verifyEvents());
        defaultApplyEvents(runInput, events$, agent, []).subscribe({
          next: (m) => {
            if (m.messages) out.messages = m.messages;
            if (m.state !== undefined) out.state = m.state;
          },
          error: (e: unknown) => resolve({ ...out, error: e instanceof Error ? e : new Error(String(e)) }),
          complete: () => resolve(out),
        });
      }),
  );
}

export interface Ran {
  /** What runAgent rejected with, if it did. */
  rejected: Error | undefined;
  /** Whether every run the client saw start was seen to end (onRunFinishedEvent or onRunErrorEvent), and one started. */
  ended: boolean;
}

/** HttpAgent.runAgent, its request answered with `sse` as text/event-stream. */
export function runHttp(input: Input, sse: string): Promise<Ran> {
  return silenced(async () => {
    const fetch = (): Promise<Response> => Promise.resolve(new Response(sse, { headers: { "content-type": "text/event-stream" } }));
    const agent = new HttpAgent({ url: "http://agent.invalid/", threadId: input.threadId, initialState: structuredClone(input.state), fetch });
    let open = 0;
    let runs = 0;
    try {
      await agent.runAgent(
        { runId: input.runId },
        {
          onRunStartedEvent: () => void (runs++, open++),
          onRunFinishedEvent: () => void open--,
          onRunErrorEvent: () => void open--,
        },
      );
      return { rejected: undefined, ended: runs > 0 && open === 0 };
    } catch (e) {
      return { rejected: e instanceof Error ? e : new Error(String(e)), ended: false };
    }
  });
}

/** Whether the run failed in the client: runAgent rejected, or a run never ended. */
export const failed = (r: Ran): boolean => r.rejected !== undefined || !r.ended;
