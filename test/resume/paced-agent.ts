import type { Handler } from "../proxy/upstream.js";
import { sse } from "../proxy/upstream.js";

/**
 * An AG-UI agent for resume tests: the events of one run, with state deltas that need the proxy's
 * repair (so the mirror matters) and a text message (so messages do). It writes the first `pause`
 * events, then waits for `go()` before the rest, so that a test can cut the client's connection
 * while the run is live and the rest is still to come.
 */
export function runEvents(threadId: string, runId: string): unknown[] {
  return [
    { type: "RUN_STARTED", threadId, runId },
    { type: "STATE_DELTA", delta: [{ op: "replace", path: "/toolState", value: {} }] },
    { type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState/raster-ops/dataset", value: "era5" }] },
    { type: "TEXT_MESSAGE_START", messageId: `m-${runId}`, role: "assistant" },
    { type: "TEXT_MESSAGE_CONTENT", messageId: `m-${runId}`, delta: "Fetching… 🛰" },
    { type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk ☕" }] },
    { type: "TEXT_MESSAGE_CONTENT", messageId: `m-${runId}`, delta: " done." },
    { type: "TEXT_MESSAGE_END", messageId: `m-${runId}` },
    { type: "STATE_DELTA", delta: [{ op: "replace", path: "/toolState/count", value: 2 }] },
    { type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "bread" }] },
    { type: "RUN_FINISHED", threadId, runId },
  ];
}

export interface Paced {
  handler: Handler;
  /** Lets every run that is waiting write the rest of its events. */
  go(): void;
  /** Resolves when a run has written its first `pause` events. */
  paused(): Promise<void>;
}

export function pacedAgent(pause: number): Paced {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const waiters: (() => void)[] = [];
  let hits = 0;
  return {
    go: () => release(),
    paused: () => new Promise<void>((r) => (hits > 0 ? r() : waiters.push(r))),
    handler: (seen) => {
      const input = JSON.parse(seen.body.toString("utf8")) as { threadId: string; runId: string };
      const events = runEvents(input.threadId, input.runId).map(sse);
      seen.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      // The head goes at once, as an SSE server sends it, even when no event comes before go().
      seen.res.flushHeaders();
      seen.res.write(events.slice(0, pause).join(""));
      hits++;
      for (const w of waiters.splice(0)) w();
      void released.then(() => {
        if (!seen.res.destroyed) seen.res.end(events.slice(pause).join(""));
      });
    },
  };
}
