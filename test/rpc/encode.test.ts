import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeResponse } from "../../src/rpc/common/encode.js";
import { json } from "../harness/arbitraries.js";

describe("encodeResponse", () => {
  it("writes exactly JSON.stringify's text for a change result whose delta appears twice", () => {
    fc.assert(
      fc.property(fc.array(json, { minLength: 1, maxLength: 4 }), json, fc.boolean(), (delta, other, withSnapshot) => {
        const events: object[] = [{ type: "STATE_DELTA", delta }];
        if (withSnapshot) events.unshift({ type: "STATE_SNAPSHOT", snapshot: other });
        const response = { jsonrpc: "2.0", id: 7, result: { threadId: "t", version: 3, delta, skipped: [{ index: 0, op: other, code: "INVALID_OP", message: "m" }], events, runId: undefined } };
        expect(encodeResponse(response)).toBe(JSON.stringify(response));
      }),
    );
  });
  it("writes exactly JSON.stringify's text for everything else", () => {
    for (const r of [
      { jsonrpc: "2.0", id: "a", result: { version: 1, delta: [], events: [] } },
      { jsonrpc: "2.0", id: null, error: { code: -32600, message: "x", data: { code: "INVALID_REQUEST" } } },
      { jsonrpc: "2.0", id: 1, result: { pointer: "/a~1b" } },
      { jsonrpc: "2.0", id: 2, result: { version: 0, delta: [{ op: "add", path: "/a", value: 1 }], events: [{ type: "STATE_DELTA", delta: [{ op: "add", path: "/a", value: 1 }] }] } },
    ]) {
      expect(encodeResponse(r)).toBe(JSON.stringify(r));
    }
  });
});
