import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { encodeResult } from "../../src/rpc/common/encode.js";
import { result } from "../../src/rpc/common/wire.js";
import { json } from "../../scripts/harness/arbitraries.js";

describe("encodeResult", () => {
  it("writes exactly JSON.stringify's text for a change result whose delta appears twice", () => {
    fc.assert(
      fc.property(fc.array(json, { minLength: 1, maxLength: 4 }), json, fc.boolean(), fc.oneof(fc.integer(), fc.string(), fc.constant(null)), (delta, other, withSnapshot, id) => {
        const events: object[] = [{ type: "STATE_DELTA", delta }, { type: "ACTIVITY_DELTA", messageId: "m", activityType: "plan", patch: delta }];
        if (withSnapshot) events.unshift({ type: "STATE_SNAPSHOT", snapshot: other });
        const value = { threadId: "t", version: 3, delta, skipped: [{ index: 0, op: other, code: "INVALID_OP", message: "m" }], events, runId: undefined, ratio: -0, big: 1e21 };
        expect(encodeResult(id, value)).toBe(JSON.stringify(result(id, value)));
      }),
    );
  });
  it("writes the delta's text once per place it appears, from one serialization", () => {
    const delta = [{ op: "add", path: "/a", value: { n: 1 } }];
    const text = encodeResult(1, { version: 1, delta, events: [{ type: "STATE_DELTA", delta }, { type: "OTHER", delta: [...delta] }] });
    expect(JSON.parse(text)).toEqual({ jsonrpc: "2.0", id: 1, result: { version: 1, delta, events: [{ type: "STATE_DELTA", delta }, { type: "OTHER", delta }] } });
  });
  it("writes exactly JSON.stringify's text for everything else", () => {
    for (const [id, r] of [
      ["a", { version: 1, delta: [], events: [] }],
      [1, { pointer: "/a~1b" }],
      [null, { path: ["a", "b"] }],
      [2, { version: 0, delta: [{ op: "add", path: "/a", value: 1 }], events: [{ type: "STATE_DELTA", delta: [{ op: "add", path: "/a", value: 1 }] }] }],
    ] as const) {
      expect(encodeResult(id, r)).toBe(JSON.stringify(result(id, r)));
    }
  });
});
