import { describe, expect, it } from "vitest";
import { baselineOfBody } from "../../src/edge/baseline.js";
import { badPath, bodyBytes, handles } from "../../src/edge/request.js";
import { framingOf, repairedHead, streamOf } from "../../src/edge/response.js";

/**
 * The stream edge's rules (src/edge/, protocol/README.md §14), pure: the rows of issue 39's drift
 * table, where the three middleware used to differ, each decided here once.
 */
describe("paths: one subtree rule", () => {
  it("an entry handles itself and what lies below it, with or without its trailing slash, never a sibling", () => {
    for (const entry of ["/agent", "/agent/", "/agent//"]) {
      expect(["/agent", "/agent/", "/agent/run", "/agent/run?x=1", "/agent?x=1"].map((p) => handles([entry], p))).toEqual([true, true, true, true, true]);
      expect(["/agents", "/agen", "/", "/other/agent"].map((p) => handles([entry], p))).toEqual([false, false, false, false]);
    }
  });
  it("no paths handles everything; / handles everything; an empty list nothing", () => {
    expect(handles(undefined, "/x")).toBe(true);
    expect(handles(["/"], "/x/y")).toBe(true);
    expect(handles([], "/x")).toBe(false);
  });
  it("an entry that is no path is found", () => {
    expect(badPath(["/a", "b", "/c"])).toBe(1);
    expect(badPath(["/a"])).toBe(-1);
  });
});

describe("the body kept: --max-request-body, at most half a message", () => {
  it("is the smaller of the two", () => {
    expect(bodyBytes(32 << 20, 64 << 20)).toBe(32 << 20);
    expect(bodyBytes(32 << 20, 1 << 20)).toBe(512 << 10);
  });
});

describe("content types: one list", () => {
  it("reads SSE and the five NDJSON names, any case, parameters ignored", () => {
    expect(framingOf("Text/Event-Stream; charset=utf-8")).toBe("sse");
    for (const t of ["application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonl", "APPLICATION/JSONLINES;q=1"]) expect(framingOf(t)).toBe("ndjson");
    for (const t of [undefined, "", "application/json", "text/plain", "application/vnd.ag-ui.event+proto"]) expect(framingOf(t)).toBeUndefined();
  });
  it("passes an answer that is no stream, or is content-encoded, with a stable code", () => {
    expect(streamOf([["Content-Type", "application/json"]])).toMatchObject({ pass: { code: "NOT_AN_EVENT_STREAM" } });
    expect(streamOf([["Content-Type", "text/event-stream"], ["Content-Encoding", "gzip"]])).toMatchObject({ pass: { code: "CONTENT_ENCODED" } });
    expect(streamOf([["content-type", "text/event-stream"], ["content-encoding", "identity"]])).toEqual({ framing: "sse" });
  });
});

describe("the repaired head", () => {
  it("keeps the app's headers in order, less Content-Length, with the announcement when resumable", () => {
    const app: [string, string][] = [["Content-Type", "text/event-stream"], ["Content-Length", "9"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["Access-Control-Allow-Origin", "*"]];
    expect(repairedHead(app, false)).toEqual([["Content-Type", "text/event-stream"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["Access-Control-Allow-Origin", "*"]]);
    expect(repairedHead(app, true)).toEqual([["Content-Type", "text/event-stream"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["Access-Control-Allow-Origin", "*"], ["ag-ui-resumable", "true"], ["access-control-expose-headers", "ag-ui-resumable"]]);
  });
  it("gives an Access-Control-Expose-Headers of the app's whole, with the announcement added once", () => {
    expect(repairedHead([["Access-Control-Allow-Origin", "*"], ["Access-Control-Expose-Headers", "x-trace"]], true)).toEqual([["Access-Control-Allow-Origin", "*"], ["ag-ui-resumable", "true"], ["access-control-expose-headers", "x-trace, ag-ui-resumable"]]);
  });
});

describe("the baseline", () => {
  it("is the body's state, or {} with the reason", () => {
    expect(baselineOfBody('{"state":{"a":1},"threadId":"t","messages":[]}', undefined)).toEqual({ state: { a: 1 }, note: undefined, threadId: "t", messages: [] });
    expect(baselineOfBody(undefined, undefined).note).toBe("BODY_TOO_LARGE");
    expect(baselineOfBody("{}", "gzip").note).toBe("BODY_ENCODED");
    expect(baselineOfBody("nope", undefined).note).toBe("BODY_NOT_JSON");
    expect(baselineOfBody('{"state":[1]}', "identity").note).toBe("STATE_NOT_OBJECT");
    expect(baselineOfBody("", undefined)).toEqual({ state: {}, note: undefined });
  });
});
