import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mayNestPast, scanJson } from "../../src/json/scan.js";
import { json } from "../../scripts/harness/arbitraries.js";

const nested = (depth: number): unknown => (depth === 0 ? 1 : depth % 2 ? [nested(depth - 1)] : { k: nested(depth - 1) });

describe("mayNestPast: the pre-check that lets small messages skip the nesting walk", () => {
  it("is true whenever the walk would find the value too deep (so skipping the walk never lets one through)", () => {
    fc.assert(
      fc.property(fc.oneof(json, fc.integer({ min: 0, max: 12 }).map(nested)), fc.integer({ min: 1, max: 12 }), (value, max) => {
        if (scanJson(value, max)?.kind === "too-deep") expect(mayNestPast(JSON.stringify(value), max)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("counts brackets, not depth: nesting exactly to the limit is flagged, one level less is not", () => {
    expect(mayNestPast(JSON.stringify(nested(5)), 5)).toBe(true);
    expect(mayNestPast(JSON.stringify(nested(4)), 5)).toBe(false);
    expect(scanJson(nested(5), 5)).toBeUndefined();
    expect(scanJson(nested(6), 5)).toEqual({ kind: "too-deep", depth: 6 });
  });

  it("counts brackets inside strings too, which only sends more text to the walk", () => {
    expect(mayNestPast(JSON.stringify({ s: "[[[[{{{{" }), 5)).toBe(true);
    expect(mayNestPast('{"a":[1,2],"b":{"c":3}}', 4)).toBe(false);
  });
});
