import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { locateSyntaxError } from "../../src/json/syntax-error.js";
import { json } from "../../scripts/harness/arbitraries.js";

/** Issue 22: the reader names where text stops being JSON; it must agree with JSON.parse on what is JSON. */
const parses = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

describe("locateSyntaxError", () => {
  it("finds nothing in text JSON.parse takes, spaced or not", () => {
    fc.assert(
      fc.property(json, fc.constantFrom(undefined, 1, "\t"), (value, space) => {
        expect(locateSyntaxError(JSON.stringify(value, null, space) ?? "null")).toBeUndefined();
      }),
      { numRuns: 1000 },
    );
  });

  it("finds a place in every text JSON.parse refuses, and nothing where it does not: cut, spliced or with a character in", () => {
    const mangled = fc
      .tuple(json, fc.nat(), fc.constantFrom("cut", "insert", "delete"), fc.constantFrom(",", "}", "]", ":", '"', "x", "-", "0", "\u0001", "\\", " ", "{", "["))
      .map(([value, at, how, c]) => {
        const text = JSON.stringify(value) ?? "null";
        const i = at % (text.length + 1);
        return how === "cut" ? text.slice(0, i) : how === "insert" ? text.slice(0, i) + c + text.slice(i) : text.slice(0, i) + text.slice(i + 1);
      });
    fc.assert(
      fc.property(mangled, (text) => {
        expect(locateSyntaxError(text) === undefined, JSON.stringify(text)).toBe(parses(text));
      }),
      { numRuns: 5000 },
    );
  });

  it("names the line, the column and the pointer of the value being read", () => {
    expect(locateSyntaxError('{"a":{"b":[1,2,}')).toEqual({ line: 1, column: 16, pointer: "/a/b/2", message: 'unexpected "}" where a value belongs' });
    expect(locateSyntaxError('{\n  "x/y": {"~": tru}\n}')).toMatchObject({ line: 2, column: 16, pointer: "/x~1y/~0" });
    expect(locateSyntaxError("[1 2]")).toMatchObject({ pointer: "/0", message: 'expected "," or "]", found "2"' });
    expect(locateSyntaxError('{"a":1,}')).toMatchObject({ pointer: "", column: 8 });
    expect(locateSyntaxError("")).toMatchObject({ line: 1, column: 1, pointer: "", message: "the text ends before the value does" });
    expect(locateSyntaxError('{"a":1} x')).toMatchObject({ column: 9, message: 'unexpected "x" after the value' });
  });

  it("runs out of no stack on deep text", () => {
    // The text ends inside the innermost array, reading its element 0.
    const at = locateSyntaxError("[".repeat(200_000));
    expect(at?.pointer === "/0".repeat(200_000)).toBe(true);
  });
});
