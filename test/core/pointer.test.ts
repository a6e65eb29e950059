import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { escapeSegment, formatPointer, parseIndex, parsePointer, unescapeSegment } from "../../src/core/index.js";
import { readFixture } from "../../scripts/harness/fixtures.js";

interface Group {
  tests: { data: unknown; valid: boolean; description: string }[];
}
const groups = readFixture<Group[]>("json-pointer/json-schema-test-suite.draft2020-12.format.json-pointer.json");
const vectors = groups.flatMap((g) => g.tests).filter((t): t is { data: string; valid: boolean; description: string } => typeof t.data === "string");

describe("RFC 6901 pointer syntax vectors (JSON-Schema-Test-Suite format: json-pointer)", () => {
  it("has the 34 string vectors", () => expect(vectors).toHaveLength(34));
  for (const v of vectors) {
    it(`${v.valid ? "accepts" : "refuses"} ${JSON.stringify(v.data)} (${v.description})`, () => {
      const r = parsePointer(v.data);
      expect(r.ok).toBe(v.valid);
      if (r.ok) expect(formatPointer(r.value)).toBe(v.data);
      else expect(r.error.code).toBe("INVALID_POINTER");
    });
  }
});

describe("escaping", () => {
  it("escapes ~ before /, so a/b becomes a~1b and ~1 becomes ~01", () => {
    expect(escapeSegment("raster-ops/dataset")).toBe("raster-ops~1dataset");
    expect(escapeSegment("~1")).toBe("~01");
    expect(formatPointer(["toolState", "raster-ops/dataset"])).toBe("/toolState/raster-ops~1dataset");
  });
  it("unescapes ~1 before ~0, so ~01 reads back as ~1, not /", () => {
    expect(unescapeSegment("~01")).toBe("~1");
    expect(unescapeSegment("a~1b~0c")).toBe("a/b~c");
  });
  it("round-trips any path through format and parse", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: fc.constantFrom("~", "/", "0", "1", "a", "", "é") })), (path) => {
        const r = parsePointer(formatPointer(path));
        expect(r.ok && r.value).toEqual(path);
      }),
    );
  });
  it("parses the root pointer to the empty path and / to one empty segment", () => {
    expect(parsePointer("")).toEqual({ ok: true, value: [] });
    expect(parsePointer("/")).toEqual({ ok: true, value: [""] });
  });
});

describe("array index tokens (protocol/README.md §3)", () => {
  it("accepts 0, 1, 10 and the largest safe integer", () => {
    expect(parseIndex("0")).toBe(0);
    expect(parseIndex("10")).toBe(10);
    expect(parseIndex(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseIndex("-")).toBe("-");
  });
  it("refuses leading zeros, empty tokens, exponents, signs and unsafe integers", () => {
    for (const t of ["01", "00", "", "1e0", "-1", "+1", " 1", "1.0", "0x1", "9007199254740992", "4294967296999999999"]) {
      expect(parseIndex(t), t).toBeUndefined();
    }
  });
});
