import { HttpAgent, type BaseEvent } from "@ag-ui/client";
import fastJsonPatch, { type Operation } from "fast-json-patch";
import { expect, vi } from "vitest";

/**
 * An app that writes N events and then raises (Python), panics (Go) or throws
 * (Clojure), read through each middleware with the real HttpAgent: every
 * event the app wrote must reach the client, repaired, in order, and the
 * response then end as the server ends it without the middleware (protocol/
 * README.md §14). The three servers (clients/python/examples/raise_server.py,
 * clients/go/examples/raiseagent, clients/clojure/test/agui_state/
 * ring_raise_agent.clj) write the run `events` below, and serve it on
 * /direct (no middleware), /pass (lifecycle "pass") and /repair (lifecycle
 * "repair"); GET /stats is their sidecar's.
 */

export type Event = Record<string, unknown> & { type: string };

export interface Shape {
  /** Events the app writes, RUN_STARTED first. */
  n: number;
  /** Characters of each snapshot's pad and each text content: 65,000 makes an event of about 64 KB. */
  size: number;
  /** The last of the n events is RUN_FINISHED: the run ended, then the app raised. */
  finished?: boolean;
}

/** The shapes each file reads, each several times: N up to a few hundred, events up to 64 KB. */
export const SHAPES: readonly Shape[] = [
  { n: 1, size: 16 },
  { n: 21, size: 16 },
  { n: 21, size: 65_000 },
  { n: 22, size: 16, finished: true },
  { n: 300, size: 1_000 },
  { n: 300, size: 65_000 },
];
export const TRIES = 3;

/** The run the servers write (each server has its own copy of this rule). */
export function events(threadId: string, runId: string, { n, size, finished }: Shape): Event[] {
  const pad = "p".repeat(size);
  const out: Event[] = [{ type: "RUN_STARTED", threadId, runId }];
  for (let i = 1; i < n; i++) {
    out.push(
      [
        { type: "STATE_SNAPSHOT", snapshot: { step: i, pad } },
        { type: "STATE_DELTA", delta: [{ op: "add", path: "/step", value: i }] },
        { type: "TEXT_MESSAGE_START", messageId: `m${i}`, role: "assistant" },
        { type: "TEXT_MESSAGE_CONTENT", messageId: `m${i - 1}`, delta: pad },
        { type: "TEXT_MESSAGE_END", messageId: `m${i - 2}` },
      ][(i - 1) % 5] as Event,
    );
  }
  if (finished === true && n > 1) out[n - 1] = { type: "RUN_FINISHED", threadId, runId };
  return out;
}

/** The state a client holds after `sent`, from {}. */
export function stateAfter(sent: readonly Event[]): unknown {
  let state: unknown = {};
  for (const e of sent) {
    if (e.type === "STATE_SNAPSHOT") state = structuredClone(e["snapshot"]);
    if (e.type === "STATE_DELTA") state = fastJsonPatch.applyPatch(state, structuredClone(e["delta"] as Operation[]), true, false).newDocument;
  }
  return state;
}

export interface Read {
  events: Event[];
  /** runAgent rejected: the response broke off (or the client failed the run). */
  rejected: boolean;
  state: unknown;
}

/** One run through `url` with HttpAgent: every event its onEvent saw, in order. */
export async function read(url: string, threadId: string, runId: string): Promise<Read> {
  const agent = new HttpAgent({ url, threadId, initialState: {} });
  const seen: Event[] = [];
  let rejected = false;
  // A run that breaks off is the client's console.error; it is asserted as `rejected` instead.
  const quiet = [vi.spyOn(console, "error").mockImplementation(() => undefined), vi.spyOn(console, "warn").mockImplementation(() => undefined)];
  try {
    await agent.runAgent({ runId }, { onEvent: ({ event }: { event: BaseEvent }) => void seen.push(structuredClone(event) as unknown as Event) });
  } catch {
    rejected = true;
  } finally {
    for (const spy of quiet) spy.mockRestore();
  }
  return { events: seen, rejected, state: agent.state };
}

/** The messages left open at the end of `sent`, in the order they started. */
function openMessages(sent: readonly Event[]): string[] {
  const open: string[] = [];
  for (const e of sent) {
    if (e.type === "TEXT_MESSAGE_START") open.push(String(e["messageId"]));
    if (e.type === "TEXT_MESSAGE_END") open.splice(open.indexOf(String(e["messageId"])), 1);
  }
  return open;
}

/**
 * Reads every shape TRIES times through `base` (a server of raise-run.ts's
 * kind) on each route, and holds what arrived to what the app wrote: /direct
 * and /pass exactly the n events, and the break of the response the server
 * makes; /repair the n events, then only what lifecycle repair adds (the open
 * message's end and RUN_ERROR INCOMPLETE_STREAM) and a clean end, or, after
 * the run's own RUN_FINISHED, nothing more and the server's break.
 */
export async function readAll(base: string, label: string, extra = ""): Promise<void> {
  for (const shape of SHAPES) {
    for (let t = 0; t < TRIES; t++) {
      const threadId = `t-${label}-${shape.n}-${shape.size}-${t}`;
      const query = `n=${shape.n}&size=${shape.size}${shape.finished === true ? "&finished=1" : ""}${extra}`;
      for (const route of ["direct", "pass", "repair"]) {
        const runId = `r-${route}`;
        const sent = events(threadId, runId, shape);
        const got = await read(`${base}/${route}?${query}`, threadId, runId);
        const what = `${label} /${route}?${query}, try ${t + 1}`;
        const added = got.events.slice(sent.length);
        expect(got.events.length, `${what}: events before the end`).toBeGreaterThanOrEqual(sent.length);
        expect(got.events.slice(0, sent.length), what).toEqual(sent);
        if (route === "repair" && shape.finished !== true) {
          const closes = openMessages(sent).map((messageId) => ({ type: "TEXT_MESSAGE_END", messageId }));
          expect(added, `${what}: what repair adds`).toEqual([...closes, expect.objectContaining({ type: "RUN_ERROR", code: "INCOMPLETE_STREAM" })]);
          expect(got.rejected, `${what}: a whole, failed run ends cleanly`).toBe(false);
        } else {
          expect(added, `${what}: nothing after the app's events`).toEqual([]);
          expect(got.rejected, `${what}: the response breaks off, as the server breaks it`).toBe(true);
        }
        expect(got.state, `${what}: the state`).toEqual(stateAfter(sent));
      }
    }
  }
}

/** Waits until the sidecar behind `base` holds no open stream: every response's stream was closed (a hang guard, no timing). */
export async function noStreamLeft(base: string): Promise<void> {
  for (;;) {
    const stats = (await (await fetch(`${base}/stats`)).json()) as { streams: number };
    if (stats.streams === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}
