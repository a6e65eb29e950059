import type { Handler } from "./upstream.js";
import { writeSliced } from "./upstream.js";
import { streamOf } from "./sloppy-agent.js";

/**
 * An AG-UI agent with the defect issue 23 is about, the way LangGraph,
 * Strands and Microsoft Agent Framework behave: after every tool write it
 * sends the whole state it knows as a STATE_SNAPSHOT, which knows nothing of
 * the keys the client keeps for itself. Its tool state lives in its own
 * store, per thread, across runs; `other` is state of its own beside it.
 */
export function snapshotEvents(input: { threadId: string; runId: string }, store: Map<string, Record<string, unknown>>, tools = 3): unknown[] {
  const { threadId, runId } = input;
  const toolState = store.get(threadId) ?? {};
  store.set(threadId, toolState);
  const events: unknown[] = [{ type: "RUN_STARTED", threadId, runId }];
  for (let k = 0; k < tools; k++) {
    const id = `call-${runId}-${k}`;
    events.push({ type: "TOOL_CALL_START", toolCallId: id, toolCallName: "write" }, { type: "TOOL_CALL_END", toolCallId: id });
    toolState[`tool-${k}`] = { run: runId, step: k };
    events.push({ type: "STATE_SNAPSHOT", snapshot: { toolState: structuredClone(toolState), other: { notes: "n".repeat(2000) } } });
  }
  events.push({ type: "RUN_FINISHED", threadId, runId });
  return events;
}

/** The agent as an upstream route, written in 7-byte slices; `sent` gets each answer's exact slices. */
export function snapshotRoute(sent: Buffer[][], store = new Map<string, Record<string, unknown>>()): Handler {
  return (seen) => {
    const input = JSON.parse(seen.body.toString("utf8")) as { threadId: string; runId: string };
    seen.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    sent.push(writeSliced(seen.res, streamOf(snapshotEvents(input, store)), 7));
    seen.res.end();
  };
}
