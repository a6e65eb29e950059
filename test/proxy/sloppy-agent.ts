import { gzipSync } from "node:zlib";
import type { Handler } from "./upstream.js";
import { sse, writeSliced } from "./upstream.js";

/**
 * The events of a sloppy AG-UI agent: each STATE_DELTA and ACTIVITY_DELTA
 * makes one of the mistakes agent servers are known to make, and each one
 * alone makes @ag-ui/client drop it (or ignore it) against a fresh thread.
 */
export function sloppyEvents(input: { threadId: string; runId: string }): unknown[] {
  const { threadId, runId } = input;
  return [
    { type: "RUN_STARTED", threadId, runId },
    // replace for a new key
    { type: "STATE_DELTA", delta: [{ op: "replace", path: "/toolState", value: {} }] },
    // a key with "/" sent unescaped (it must travel as raster-ops~1dataset)
    { type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState/raster-ops/dataset", value: "era5" }] },
    // replace /steps against {}
    { type: "STATE_DELTA", delta: [{ op: "replace", path: "/steps", value: [{ title: "fetch", done: false }] }] },
    // replace on a missing member of a fresh thread's object
    { type: "STATE_DELTA", delta: [{ op: "replace", path: "/toolState/count", value: 1 }] },
    // append to an array that does not exist yet
    { type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk ☕" }] },
    { type: "TEXT_MESSAGE_START", messageId: `m-${runId}`, role: "assistant" },
    { type: "TEXT_MESSAGE_CONTENT", messageId: `m-${runId}`, delta: "Planning… 🗺" },
    { type: "TEXT_MESSAGE_END", messageId: `m-${runId}` },
    // an ACTIVITY_DELTA before its snapshot
    { type: "ACTIVITY_DELTA", messageId: "plan-2", activityType: "plan", patch: [{ op: "add", path: "/steps/-", value: "too early" }] },
    { type: "ACTIVITY_SNAPSHOT", messageId: "plan-1", activityType: "plan", content: { title: "Plan" } },
    // an ACTIVITY_DELTA whose ops do not fit the content
    { type: "ACTIVITY_DELTA", messageId: "plan-1", activityType: "plan", patch: [{ op: "replace", path: "/status", value: "running" }, { op: "add", path: "/steps/-", value: "fetch" }] },
    { type: "ACTIVITY_SNAPSHOT", messageId: "plan-2", activityType: "plan", content: { steps: [] } },
    { type: "RUN_FINISHED", threadId, runId },
  ];
}

/** The bytes of an event stream, as the sloppy agent writes it. */
export const streamOf = (events: readonly unknown[]): Buffer => Buffer.from(events.map(sse).join(""), "utf8");

/**
 * The sloppy agent as an upstream route: answers a RunAgentInput with its
 * events as `text/event-stream`, written in 7-byte slices so events and UTF-8
 * sequences are cut across reads. `sent` gets each answer's exact slices, for
 * an oracle to replay.
 */
export function sloppyRoute(sent: Buffer[][], lineEnd = "\n"): Handler {
  return (seen) => {
    const input = JSON.parse(seen.body.toString("utf8")) as { threadId: string; runId: string };
    seen.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const stream = streamOf(sloppyEvents(input));
    sent.push(writeSliced(seen.res, lineEnd === "\n" ? stream : Buffer.from(stream.toString("utf8").replaceAll("\n", lineEnd), "utf8"), 7));
    seen.res.end();
  };
}

/** The same agent behind a server that gzips its answers; `sent` gets each answer's bytes before compression. */
export function sloppyGzipRoute(sent: Buffer[][]): Handler {
  return (seen) => {
    const input = JSON.parse(seen.body.toString("utf8")) as { threadId: string; runId: string };
    const plain = streamOf(sloppyEvents(input));
    sent.push([plain]);
    seen.res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "content-encoding": "gzip" }).end(gzipSync(plain));
  };
}
