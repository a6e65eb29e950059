import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LOADED_PIPELINE } from "../../scripts/harness/paired.js";
import type { CallResult } from "../../src/protocol/errors.js";
import { StreamService } from "../../src/service/stream-service.js";
import { CORPUS, cut, toSse } from "../stream/streams.js";

/**
 * openStream's request form and fixStream's `pending` and `head` (protocol/README.md §14, issue 39),
 * in-process: what a middleware that decides nothing is told, and that the tail it keeps to fail
 * open with is exactly what the sidecar had not answered for.
 */
function value<T>(r: CallResult<T>): T {
  if (!r.ok) throw new Error(`failed: ${JSON.stringify(r.error)}`);
  return r.value;
}
const svc = (maxMessageBytes?: number) => new StreamService({ pipeline: LOADED_PIPELINE, maxRequestBody: 1 << 20, ...(maxMessageBytes !== undefined ? { limits: { maxMessageBytes } } : {}) });
const RUN = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n';
const request = { method: "POST", path: "/agent", headers: [["Content-Type", "application/json"]] as [string, string][], body: '{"threadId":"t","state":{"todos":[]}}' };
const sse = { status: 200, headers: [["Content-Type", "text/event-stream"]] as [string, string][] };

describe("classifyRequest for a middleware", () => {
  it("says whether the path is handled, and how much body to keep", () => {
    expect(value(svc().classifyRequest({ method: "POST", path: "/agents", headers: [], paths: ["/agent"] }))).toEqual({ kind: "forward", handled: false });
    expect(value(svc().classifyRequest({ method: "POST", path: "/agent/run", headers: [], paths: ["/agent"] }))).toEqual({ kind: "forward", handled: true, bodyBytes: 1 << 20 });
    expect(value(svc(1 << 20).classifyRequest({ method: "POST", path: "/x", headers: [] })).bodyBytes).toBe(512 << 10);
  });
  it("refuses an entry that is no path", () => {
    const r = svc().classifyRequest({ method: "POST", path: "/x", headers: [], paths: ["/a", "agent"] });
    expect(r.ok ? undefined : r.error.data).toMatchObject({ field: "/paths/1", reason: "INVALID_VALUE" });
  });
});

describe("openStream's request form", () => {
  it("opens a stream from the raw request and head, with the head to write and the replay bound", () => {
    const opened = value(svc().openStream({ request, response: { status: 200, headers: [...sse.headers, ["Content-Length", "3"]] } }));
    expect(opened).toEqual({ streamId: "s1", headers: [["Content-Type", "text/event-stream"]], replayBytes: 8 << 20 });
  });
  it("repairs from the body's state: a delta that fits it passes untouched", () => {
    const s = svc();
    const { streamId } = value(s.openStream({ request, response: sse }));
    const delta = 'data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":1}]}\n\n';
    expect(value(s.fixStream({ streamId: streamId as string, text: RUN + delta })).text).toBe(RUN + delta);
  });
  it("says pass, and opens nothing, for an answer that is no stream", () => {
    const s = svc();
    expect(value(s.openStream({ request, response: { status: 200, headers: [["Content-Type", "application/json"]] } }))).toMatchObject({ pass: { code: "NOT_AN_EVENT_STREAM" } });
    expect(s.stats().streams).toBe(0);
  });
  it("takes neither state, framing nor a resume object beside request", () => {
    for (const [extra, field] of [[{ state: {} }, "/state"], [{ framing: "sse" as const }, "/framing"], [{ resume: { path: "/a" } }, "/resume"]] as const) {
      const r = svc().openStream({ request, response: sse, ...extra });
      expect(r.ok ? undefined : r.error.data).toMatchObject({ field, reason: "CONFLICTING_PARAMS" });
    }
    const alone = svc().openStream({ request });
    expect(alone.ok ? undefined : alone.error.data).toMatchObject({ field: "/response", reason: "MISSING" });
  });
});

describe("fixStream's pending and head", () => {
  it("pending is the UTF-8 bytes given and not yet answered for; head the first event's end when it is a RUN_STARTED", () => {
    const s = svc();
    const { streamId } = value(s.openStream({ request, response: sse }));
    const id = streamId as string;
    expect(value(s.fixStream({ streamId: id, text: "data: {\"type\":\"RUN_ST" }))).toMatchObject({ text: "", pending: 21 });
    const r = value(s.fixStream({ streamId: id, text: 'ARTED","threadId":"t","runId":"r"}\n\ndata: "é' }));
    expect(r).toMatchObject({ text: RUN, pending: Buffer.byteLength('data: "é'), head: Buffer.byteLength(RUN) });
    expect(value(s.fixStream({ streamId: id, text: '"\n\n' }))).not.toHaveProperty("head");
  });
  it("gives no head when the first event is not a RUN_STARTED", () => {
    const s = svc();
    const { streamId } = value(s.openStream({ request, response: sse }));
    expect(value(s.fixStream({ streamId: streamId as string, text: 'data: {"type":"CUSTOM","name":"n","value":1}\n\n' + RUN }))).not.toHaveProperty("head");
  });
  it("pending is exactly the text after the last whole event, however the stream is cut: the tail a middleware keeps", () => {
    fc.assert(
      fc.property(fc.constantFrom(...CORPUS), fc.array(fc.nat(), { maxLength: 8 }), (c, cuts) => {
        const text = toSse(c.events);
        const s = svc();
        const { streamId } = value(s.openStream({ request, response: sse }));
        let sent = "";
        for (const part of cut(text, cuts)) {
          sent += part;
          const { pending } = value(s.fixStream({ streamId: streamId as string, text: part }));
          const end = sent.lastIndexOf("\n\n");
          expect(pending).toBe(Buffer.byteLength(end < 0 ? sent : sent.slice(end + 2)));
        }
      }),
    );
  });
});
