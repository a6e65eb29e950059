import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cloneJson, decodePath, diffValue, IntegralFloat, isObject, jsonEqual, measure, type Json } from "../../src/core/index.js";
import { markerFor, mayHoldUnsafeNumber, parseJson, plainNumbers, UnsafeNumber } from "../../src/json/parse.js";
import { scanJson } from "../../src/json/scan.js";
import { Float, stringifyJson } from "../../src/json/stringify.js";
import { encodeResult } from "../../src/rpc/common/encode.js";

/** Issue 22, protocol/README.md §3 (Numbers): the parser's markers, the encoder's text, and how the core treats a whole float. */

const kind = (m: unknown): string => (m instanceof UnsafeNumber ? (m.overflow ? "overflow" : "unsafe") : m instanceof IntegralFloat ? `float ${m.text}` : "plain");

describe("markerFor: which number tokens need a marker", () => {
  it.each([
    ["0", "plain"],
    ["-0", "plain"],
    ["9007199254740991", "plain"],
    ["-9007199254740991", "plain"],
    ["9007199254740992", "unsafe"], // a double holds 2^53 exactly, but 2^53 + 1 reads as it
    ["1152921504606846976", "unsafe"],
    ["100000000000000000000", "unsafe"],
    ["1e400", "overflow"],
    ["-1e999", "overflow"],
    ["1.0", "float 1.0"],
    ["-0.0", "float -0.0"],
    ["0.000", "float 0.0"],
    ["1e2", "float 100.0"],
    ["1.5e3", "float 1500.0"],
    ["1e-400", "float 0.0"],
    ["-1e-400", "float -0.0"],
    ["0.99999999999999999", "float 1.0"],
    ["100000000000000000000.0", "float 100000000000000000000.0"],
    ["1e21", "plain"], // JavaScript writes 1e+21: a float to every reader
    ["0.5", "plain"],
    ["6.02e23", "plain"],
    ["0.9999999999999999", "plain"],
  ])("%s: %s", (token, want) => {
    expect(kind(markerFor(token))).toBe(want);
  });
});

const numberToken = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).chain((d) => fc.constantFrom(String(d), d.toExponential(), d.toPrecision(17), Math.abs(d) < 1e15 ? d.toFixed(2) : String(d))),
  fc.bigInt({ min: -(10n ** 25n), max: 10n ** 25n }).map(String),
  fc.tuple(fc.bigInt({ min: 0n, max: 10n ** 16n }), fc.integer({ min: 1, max: 22 }), fc.constantFrom("0", "9")).map(([n, k, d]) => `${n}.${d.repeat(k)}`),
  fc.tuple(fc.bigInt({ min: 0n, max: 999n }), fc.constantFrom("e", "E", "e+", "e-", "E-"), fc.integer({ min: 0, max: 500 })).map(([n, e, x]) => `${n}${e}${x}`),
);

describe("mayHoldUnsafeNumber: the pre-check that lets most messages skip the tokenizer", () => {
  it("is true for every text holding a token that needs a marker, wherever it stands (so skipping never lets one through)", () => {
    fc.assert(
      fc.property(numberToken, fc.constantFrom((t: string) => t, (t: string) => `{"a": ${t}}`, (t: string) => `[1,\n\t${t}]`, (t: string) => `{"jsonrpc":"2.0","id":"550e8400-e29b","x":[${t}]}`), (t, place) => {
        if (markerFor(t) !== undefined) expect(mayHoldUnsafeNumber(place(t)), t).toBe(true);
      }),
      { seed: 22, numRuns: 5000 },
    );
  });

  it("is false for a message whose only look-alikes are in strings or are plain floats", () => {
    expect(mayHoldUnsafeNumber('{"jsonrpc":"2.0","id":1,"method":"applyOps","params":{"threadId":"550e8400-e29b-41d4-a716-446655440000","ops":[{"op":"add","path":"/a","value":0.8444218515250481}]}}')).toBe(false);
  });
});

describe("parseJson and stringifyJson: numbers go out of the kind they came in", () => {
  it.each([
    ['{"a":1.0,"b":[1e2,-0.0,1e-400,0.5,1e21,2,1.5e3],"c":"1.0 and 1e2 in a string"}', '{"a":1.0,"b":[100.0,-0.0,0.0,0.5,1e+21,2,1500.0],"c":"1.0 and 1e2 in a string"}'],
    ["1.0", "1.0"],
    ["[0.0]", "[0.0]"],
    // A member given twice keeps its last value, and that value's kind.
    ['{"a":1.0,"a":1}', '{"a":1}'],
    ['{"a":1,"a":1.0}', '{"a":1.0}'],
    ['{"a":{"x":1.0},"b":2.0,"a":{"x":1}}', '{"a":{"x":1},"b":2.0}'],
    ['{"__proto__":1.0,"k":[{"__proto__":[2.0]}]}', '{"__proto__":1.0,"k":[{"__proto__":[2.0]}]}'],
  ])("%s", (text, out) => {
    const v = parseJson(text);
    expect(stringifyJson(v)).toBe(out);
    if (isObject(v)) expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
  });

  it("reads every float token back as the same double and kind, and JSON.parse's value where it is plain", () => {
    fc.assert(
      fc.property(numberToken, (t) => {
        const m = markerFor(t);
        if (m instanceof UnsafeNumber) return;
        const out = stringifyJson(parseJson(`[${t}]`)).slice(1, -1);
        expect(Object.is(Number(out), Number(t)), `${t} -> ${out}`).toBe(true);
        expect(/^-?\d+$/.test(out), `${t} -> ${out}`).toBe(/^-?\d+$/.test(t));
      }),
      { seed: 22, numRuns: 5000 },
    );
  });

  it("leaves a caller's string that looks like an encoded float alone", () => {
    const v = { s: "agui-state-float-0000000000000000:1.0", n: new Float(3) };
    expect(stringifyJson(v)).toBe('{"s":"agui-state-float-0000000000000000:1.0","n":3.0}');
  });

  it("refuses integers beyond 2^53 - 1 in the scan, and lets whole floats pass", () => {
    expect(scanJson(parseJson('{"a":[1.0,{"b":9007199254740992}]}'), 10)).toEqual({ kind: "unsafe-integer", field: "/a/1/b", source: "9007199254740992" });
    expect(scanJson(parseJson('{"a":[1.0,{"b":9007199254740991.0}]}'), 10)).toBeUndefined();
  });

  it("plainNumbers turns whole floats into the numbers a JavaScript peer holds", () => {
    expect(plainNumbers(parseJson('{"a":[1.0,{"b":2.0}],"c":3.0}'))).toStrictEqual({ a: [1, { b: 2 }], c: 3 });
  });

  it("encodeResult writes whole floats as floats, in the delta written once and everywhere else", () => {
    const value = parseJson('{"v":[1.0,-0.0]}') as { v: Json };
    const delta = [{ op: "add", path: "/v", value: value.v }];
    const text = encodeResult(new Float(7), { version: 1, delta, events: [{ type: "STATE_DELTA", delta }], state: value });
    expect(text).toBe('{"jsonrpc":"2.0","id":7.0,"result":{"version":1,"delta":[{"op":"add","path":"/v","value":[1.0,-0.0]}],"events":[{"type":"STATE_DELTA","delta":[{"op":"add","path":"/v","value":[1.0,-0.0]}]}],"state":{"v":[1.0,-0.0]}}}');
  });
});

describe("the core treats a whole float as the number it holds (protocol/README.md §3)", () => {
  const one = new Float(1);
  it("JSON equality: 1 equals 1.0, and nothing but an equal number does", () => {
    expect(jsonEqual(1, one)).toBe(true);
    expect(jsonEqual(one, 1)).toBe(true);
    expect(jsonEqual(one, new Float(1))).toBe(true);
    expect(jsonEqual({ a: [one] }, { a: [1] })).toBe(true);
    expect(jsonEqual(one, new Float(2))).toBe(false);
    expect(jsonEqual(one, "1")).toBe(false);
    expect(jsonEqual(one, {})).toBe(false);
    expect(jsonEqual({}, one)).toBe(false);
    expect(jsonEqual(one, [])).toBe(false);
    expect(jsonEqual(one, null)).toBe(false);
  });
  it("is a scalar: not an object, shared by a copy, sized by its text", () => {
    expect(isObject(one)).toBe(false);
    expect((cloneJson([one]) as Json[])[0]).toBe(one);
    expect(measure([new Float(100)]).bytes).toBe(measure([100]).bytes + 2);
  });
  it("a diff to an equal number of the other kind is empty; to another number, a replace carrying the float", () => {
    expect(diffValue({ n: 1 }, { n: one })).toEqual([]);
    const ops = diffValue({ n: 1 }, { n: new Float(2) });
    expect(ops).toEqual([{ op: "replace", path: ["n"], value: new Float(2) }]);
    expect(ops[0]?.op === "replace" && ops[0].value instanceof IntegralFloat).toBe(true);
  });
  it("an index written as a float is the integer it holds", () => {
    expect(decodePath(["a", new Float(0)])).toEqual({ ok: true, value: ["a", "0"] });
    expect(decodePath(["a", new Float(-0)])).toEqual({ ok: true, value: ["a", "0"] });
  });
});
