import { defaultApplyEvents, enforceEvents, transformChunks, transformHttpEventStream, verifyEvents, type AbstractAgent, type Message } from "@ag-ui/client";
import { Subject } from "rxjs";
import { vi } from "vitest";
import type { Json, JsonObject } from "../../src/core/index.js";

/**
 * The reference for `check` and `fix`: @ag-ui/client 1.0.0 itself, reading an
 * SSE stream over HTTP as HttpAgent does. The stream's bytes go through the
 * client's own transport parse (transformHttpEventStream), then the stages
 * runAgent puts before the reducer (enforceEvents, transformChunks,
 * verifyEvents), then defaultApplyEvents. Events are fed one at a time, and
 * each is given time to be applied before the next, as on a live connection,
 * so whatever the client prints or throws is tied to the event that caused it:
 * - fatal: the pipeline errors (a schema or lifecycle failure);
 * - dropped: the client warns (a patch that fails, an op it strips, ...);
 * - ignored: an ACTIVITY_DELTA for a message id the client does not hold,
 *   which it skips without a word (read off the messages it holds before).
 */

export type Kind = "fatal" | "dropped" | "ignored";

export interface Observed {
  /** For each 1-based event number, what the client did that was not applying it. */
  verdicts: Map<number, Set<Kind>>;
  /** Every warning, with the event it came from. */
  warnings: { event: number; text: string }[];
  error: { event: number; message: string } | undefined;
  state: Json;
  activities: Map<string, { activityType: string; content: JsonObject }>;
}

/** Lets the client's async reducer finish what it was given (its work is promises, then the next macrotask). */
const drain = () => new Promise<void>((resolve) => setImmediate(resolve)).then(() => new Promise<void>((resolve) => setImmediate(resolve)));

/**
 * Replays SSE events (each one `data:` block's text, LF-framed: the client's
 * SSE parser splits on "\n\n" only) from `state`, and reports what the client did.
 */
export async function replayThroughClient(blocks: readonly string[], state: JsonObject): Promise<Observed> {
  const verdicts = new Map<number, Set<Kind>>();
  const mark = (event: number, kind: Kind) => {
    let s = verdicts.get(event);
    if (!s) verdicts.set(event, (s = new Set()));
    s.add(kind);
  };
  const warnings: Observed["warnings"] = [];
  let current = 0;
  let error: Observed["error"];
  let messages: Message[] = [];
  let held: Json = structuredClone(state);
  const warn = vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => void warnings.push({ event: current, text: args.map(String).join(" ").slice(0, 2000) }));
  const source = new Subject<unknown>();
  try {
    const events$ = transformHttpEventStream(source as never).pipe(enforceEvents(), transformChunks(), verifyEvents());
    const input = { threadId: "t", runId: "r", state: structuredClone(state), messages: [], tools: [], context: [], forwardedProps: {} };
    const agent = { messages: [], state: structuredClone(state) } as unknown as AbstractAgent;
    const subscription = defaultApplyEvents(input as never, events$, agent, []).subscribe({
      next: (m) => {
        if (m.messages) messages = m.messages;
        if (m.state !== undefined) held = m.state as Json;
      },
      error: (e: unknown) => void (error = { event: current, message: e instanceof Error ? e.message : String(e) }),
    });
    source.next({ type: "headers", status: 200, headers: new Headers({ "content-type": "text/event-stream" }) });
    await drain();
    const encoder = new TextEncoder();
    // A block that does not end with "\n\n" is held by the client's SSE parser until the stream ends.
    let heldUnknown = false;
    for (const block of blocks) {
      current++;
      const target = activityDeltaTarget(block);
      const known = target !== undefined && messages.some((m) => m.id === target);
      heldUnknown = target !== undefined && !known && !block.endsWith("\n\n");
      const before = warnings.length;
      source.next({ type: "data", data: encoder.encode(block) });
      await drain();
      if (warnings.length > before) mark(current, "dropped");
      if (error) {
        mark(current, "fatal");
        break;
      }
      if (target !== undefined && !known && !heldUnknown) mark(current, "ignored");
    }
    const before = warnings.length;
    source.complete();
    await drain();
    // Text the client held unsplit is parsed at the end of the stream: what it does with it then is the last event's.
    if (warnings.length > before) mark(current, "dropped");
    if (error && !verdicts.get(current)?.has("fatal")) mark(current, "fatal");
    else if (!error && heldUnknown) mark(current, "ignored");
    subscription.unsubscribe();
  } finally {
    warn.mockRestore();
  }
  const activities = new Map<string, { activityType: string; content: JsonObject }>();
  // The first message with an id is the one the client's next event for that id finds.
  const seen = new Set<string>();
  for (const m of messages) {
    if (!seen.has(m.id) && m.role === "activity") activities.set(m.id, { activityType: m.activityType, content: m.content as JsonObject });
    seen.add(m.id);
  }
  return { verdicts, warnings, error, state: held, activities };
}

/** The messageId of an ACTIVITY_DELTA block, if it is one the client can read. */
function activityDeltaTarget(block: string): string | undefined {
  const data = block
    .split("\n")
    .filter((l) => l.startsWith("data:"))
    .map((l) => l.slice(5).replace(/^ /, ""))
    .join("\n");
  try {
    const e = JSON.parse(data) as Record<string, unknown>;
    return e["type"] === "ACTIVITY_DELTA" && typeof e["messageId"] === "string" ? e["messageId"] : undefined;
  } catch {
    return undefined;
  }
}

/** The SSE blocks of a stream the client's parser can read: each "data: ...\n\n" block with its comments and ids. */
export function sseBlocks(text: string): string[] {
  const out: string[] = [];
  for (const part of text.split(/(?<=\n\n)/)) if (part.trim() !== "") out.push(part);
  return out;
}
