import { describe, expect, it } from "vitest";
import jsonpatch from "fast-json-patch";
import {
  JsonDocument,
  toWireOp,
  decodeOps,
  measure,
  normalize,
  type StateLimits,
  type Json,
} from "../../src/core/index.js";

/** Applies ops leniently to a fresh document and returns the outcome with the document. */
function lenient(state: Json, ops: unknown[], limits?: StateLimits) {
  const doc = new JsonDocument(state);
  const out = doc.applyLenient(decodeOps(ops), ops, limits ? { limits } : {});
  return { doc, ...out, codes: out.skipped.map((s) => s.code) };
}

describe("array indexes that the usual libraries get wrong", () => {
  it("refuses /arr/4294967296 and /arr/2147483648 instead of wrapping them to 0 or a negative index", () => {
    for (const i of ["4294967296", "2147483648"]) {
      const r = lenient({ arr: [1, 2] }, [{ op: "add", path: `/arr/${i}`, value: 9 }]);
      expect(r.codes).toEqual(["INDEX_OUT_OF_BOUNDS"]);
      expect(r.doc.root).toEqual({ arr: [1, 2] });
    }
  });
  it("refuses /arr/01, /arr/ and /arr/1e0 as INVALID_INDEX", () => {
    for (const p of ["/arr/01", "/arr/", "/arr/1e0"]) {
      const r = lenient({ arr: [1, 2] }, [{ op: "replace", path: p, value: 9 }]);
      expect(r.codes, p).toEqual(["INVALID_INDEX"]);
    }
  });
  it('refuses "-" outside add, move and copy targets', () => {
    const r = lenient({ arr: [1] }, [{ op: "remove", path: "/arr/-" }, { op: "add", path: "/arr/-/x", value: 1 }]);
    expect(r.codes).toEqual(["INVALID_INDEX", "INVALID_INDEX"]);
  });
});

describe("only own properties exist", () => {
  it("replace /toString on {} is not a replace of an inherited member: it becomes an add of an own one", () => {
    const r = lenient({}, [{ op: "replace", path: "/toString", value: 1 }]);
    expect(r.applied.map((o) => o.op)).toEqual(["add"]);
    expect(Object.keys(r.doc.root as object)).toEqual(["toString"]);
  });
  it("replace /toString is PATH_NOT_FOUND in plain RFC mode, and copy from /constructor is FROM_NOT_FOUND", () => {
    const doc = new JsonDocument({});
    const a = doc.applyAtomic(decodeOps([{ op: "replace", path: "/toString", value: 1 }]), { normalize: false });
    expect(a.ok ? "" : a.error.code).toBe("PATH_NOT_FOUND");
    const r = lenient({}, [{ op: "copy", from: "/constructor", path: "/x" }, { op: "remove", path: "/hasOwnProperty" }]);
    expect(r.codes).toEqual(["FROM_NOT_FOUND", "PATH_NOT_FOUND"]);
    expect(r.doc.root).toEqual({});
  });
  it("test of a null member passes and test of a missing one fails: missing is not null", () => {
    const r = lenient({ a: null }, [
      { op: "test", path: "/a", value: null },
      { op: "test", path: "/b", value: null },
    ]);
    expect(r.codes).toEqual(["PATH_NOT_FOUND"]);
  });
});

describe("moves into their own child", () => {
  it("refuses an object moved into its own child", () => {
    const r = lenient({ a: { b: {} } }, [{ op: "move", from: "/a", path: "/a/b/c" }]);
    expect(r.codes).toEqual(["MOVE_INTO_ITSELF"]);
    expect(r.doc.root).toEqual({ a: { b: {} } });
  });
  it("refuses an array moved into its own element", () => {
    const r = lenient({ arr: [[1], 2] }, [{ op: "move", from: "/arr", path: "/arr/0/-" }]);
    expect(r.codes).toEqual(["MOVE_INTO_ITSELF"]);
    expect(r.doc.root).toEqual({ arr: [[1], 2] });
  });
  it("moves within one array as remove then add (RFC 6902 §4.4)", () => {
    const r = lenient({ arr: [1, 2, 3] }, [{ op: "move", from: "/arr/0", path: "/arr/2" }]);
    expect(r.doc.root).toEqual({ arr: [2, 3, 1] });
  });
  it("sends a move whose target passes a shifted element of the same array as remove + add, which fast-json-patch applies", () => {
    const state = { list: [[0], "s", { k: 1 }] };
    const out = normalize([{ op: "move", from: "/list/0", path: "/list/1/x" }], state);
    expect(out.delta).toEqual([
      { op: "remove", path: "/list/0" },
      { op: "add", path: "/list/1/x", value: [0] },
    ]);
    expect(out.state).toEqual({ list: ["s", { k: 1, x: [0] }] });
    // The same move, sent as a move, is refused by the client's library.
    expect(() => jsonpatch.applyPatch(structuredClone(state), [{ op: "move", from: "/list/0", path: "/list/1/x" }], true, false)).toThrow();
    expect(jsonpatch.applyPatch(structuredClone(state), out.delta as jsonpatch.Operation[], true, false).newDocument).toEqual(out.state);
  });
  it("leaves a move onto itself out of the delta", () => {
    expect(normalize([{ op: "move", from: "/a", path: "/a" }], { a: 1, b: 2 }).delta).toEqual([]);
  });
  it("puts the value back when the target of a move does not exist", () => {
    const r = lenient({ a: 1, b: [] }, [{ op: "move", from: "/a", path: "/nope/x" }]);
    expect(r.codes).toEqual(["PATH_NOT_FOUND"]);
    expect(r.doc.root).toEqual({ a: 1, b: [] });
    expect(r.doc.bytes).toBe(measure(r.doc.root).bytes);
  });
});

describe("no aliasing", () => {
  it("a later op does not change the value an earlier op added, nor the request", () => {
    const value = { n: 1 };
    const ops = [
      { op: "add", path: "/a", value },
      { op: "replace", path: "/a/n", value: 2 },
      { op: "copy", from: "/a", path: "/b" },
      { op: "add", path: "/b/m", value: 3 },
    ];
    const r = lenient({}, ops);
    expect(value).toEqual({ n: 1 });
    expect(r.doc.root).toEqual({ a: { n: 2 }, b: { n: 2, m: 3 } });
  });
  it("normalize returns nothing that aliases the given state", () => {
    const state = { list: [1] };
    const out = normalize([{ op: "add", path: "/list/-", value: 2 }], state);
    (out.state as { list: number[] }).list.push(99);
    expect(state).toEqual({ list: [1] });
  });
});

describe("forbidden keys", () => {
  it("refuses paths through __proto__ and constructor/prototype", () => {
    const r = lenient({ constructor: { prototype: {} } }, [
      { op: "add", path: "/__proto__/polluted", value: 1 },
      { op: "add", path: "/constructor/prototype/polluted", value: 1 },
      { op: "copy", from: "/__proto__", path: "/x" },
      { op: "add", path: ["a", "__proto__"], value: 1 },
    ]);
    expect(r.codes).toEqual(["FORBIDDEN_KEY", "FORBIDDEN_KEY", "FORBIDDEN_KEY", "FORBIDDEN_KEY"]);
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
  });
  it("keeps __proto__ inside a value as plain data that never reaches a prototype", () => {
    const value = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as Json;
    const r = lenient({}, [{ op: "add", path: "/v", value }]);
    const v = (r.doc.root as Record<string, Record<string, unknown>>)["v"] as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(v, "__proto__")).toBe(true);
    expect(v["polluted"]).toBeUndefined();
    expect(JSON.stringify(r.doc.root)).toBe('{"v":{"__proto__":{"polluted":true},"ok":1}}');
  });
});

describe("limits", () => {
  const limits: StateLimits = { maxDepth: 256, maxStateBytes: 1 << 20 };
  it("refuses a 5,000-deep value with LIMIT_EXCEEDED, without overflowing the stack", () => {
    let deep: Json = 1;
    for (let i = 0; i < 5000; i++) deep = [deep];
    const r = lenient({}, [{ op: "add", path: "/deep", value: deep }], limits);
    expect(r.codes).toEqual(["LIMIT_EXCEEDED"]);
    expect(r.doc.root).toEqual({});
  });
  it("refuses the copy bomb up front: 30 doubling copies of a 64 KB value stay within the budget", () => {
    const chunk: Json[] = Array.from({ length: 1024 }, (_, i) => `${i}`.padEnd(60, "x"));
    const ops: unknown[] = [{ op: "add", path: "/k0", value: chunk }];
    for (let i = 1; i <= 30; i++) ops.push({ op: "copy", from: "", path: `/k${i}` });
    const r = lenient({}, ops, limits);
    // 64 KB doubles to 1 MB after four copies; every later copy is refused before it is cloned.
    expect(r.skipped.length).toBeGreaterThanOrEqual(26);
    expect(new Set(r.codes)).toEqual(new Set(["LIMIT_EXCEEDED"]));
    expect(r.doc.bytes).toBeLessThanOrEqual(limits.maxStateBytes);
    expect(r.doc.bytes).toBe(measure(r.doc.root).bytes);
    // Counting stopped at the limit: each refusal reports a figure within one step of it (an
    // array's 1,024 separators, then one element), not the 1 MB the whole copy would count.
    // test/hardening/bombs.test.ts counts the bytes walked and cloned.
    for (const s of r.skipped) expect(Number(/got (\d+)\)/.exec(s.message)?.[1]) - limits.maxStateBytes, s.message).toBeLessThan(4096);
  });
  it("refuses a pointer deeper than maxDepth", () => {
    const r = lenient({}, [{ op: "add", path: "/a".repeat(300), value: 1 }], limits);
    expect(r.codes).toEqual(["LIMIT_EXCEEDED"]);
  });
});

describe("root and op shapes", () => {
  it("keeps the root an object: removing it or writing a non-object there is ROOT_NOT_OBJECT, an object replace goes out per member", () => {
    const r = lenient({ a: 1, k: "x" }, [
      { op: "remove", path: "" },
      { op: "replace", path: "", value: { b: 2, k: "x" } },
      { op: "add", path: "", value: [1] },
      { op: "copy", from: "/b", path: "" },
    ]);
    expect(r.skipped.map((s) => [s.index, s.code])).toEqual([
      [0, "ROOT_NOT_OBJECT"],
      [2, "ROOT_NOT_OBJECT"],
      [3, "ROOT_NOT_OBJECT"],
    ]);
    expect(r.doc.root).toEqual({ b: 2, k: "x" });
    expect(r.applied.map(toWireOp)).toEqual([
      { op: "remove", path: "/a" },
      { op: "add", path: "/b", value: 2 },
    ]);
  });
  it("re-expresses every op that names the root as member ops (§5 rule 7)", () => {
    const r = lenient({ a: { b: 1 }, "-": 0 }, [
      { op: "copy", from: "", path: "/c" },
      { op: "copy", from: "/a", path: "/a" },
      { op: "move", from: "", path: "" },
      { op: "replace", path: "/-", value: 5 },
      { op: "move", from: "/c", path: "" },
    ]);
    expect(r.codes).toEqual([]);
    expect(r.applied.map(toWireOp)).toEqual([
      { op: "add", path: "/c", value: { a: { b: 1 }, "-": 0 } },
      { op: "add", path: "/-", value: 5 },
      { op: "remove", path: "/c" },
      { op: "add", path: "/-", value: 0 },
    ]);
    expect(r.doc.root).toEqual({ a: { b: 1 }, "-": 0 });
  });
  it("reports malformed ops with their index and goes on", () => {
    const r = lenient({}, [null, { op: "spam", path: "/a" }, { op: "add", path: "a", value: 1 }, { op: "add", path: "/ok", value: 1 }, { op: "copy", path: "/x" }]);
    expect(r.skipped.map((s) => [s.index, s.code])).toEqual([
      [0, "INVALID_OP"],
      [1, "INVALID_OP"],
      [2, "INVALID_POINTER"],
      [4, "INVALID_OP"],
    ]);
    expect(r.doc.root).toEqual({ ok: 1 });
  });
  it("reports the first failing index in atomic mode and leaves the document as it was", () => {
    const doc = new JsonDocument({ a: [1] });
    const out = doc.applyAtomic(decodeOps([{ op: "add", path: "/a/-", value: 2 }, { op: "remove", path: "/a/0" }, { op: "remove", path: "/zz" }]));
    expect(out.ok ? -1 : out.error.index).toBe(2);
    expect(doc.root).toEqual({ a: [1] });
    expect(doc.bytes).toBe(measure(doc.root).bytes);
  });
});

describe("normalization (protocol/README.md §5)", () => {
  it("inserts add X [] once before add X/- when X is missing and its container exists", () => {
    const out = normalize([
      { op: "add", path: "/todos/-", value: "a" },
      { op: "add", path: "/todos/-", value: "b" },
    ]);
    expect(out.delta).toEqual([
      { op: "add", path: "/todos", value: [] },
      { op: "add", path: "/todos/-", value: "a" },
      { op: "add", path: "/todos/-", value: "b" },
    ]);
    expect(out.state).toEqual({ todos: ["a", "b"] });
  });
  it("invents nothing when X's container is missing too", () => {
    const out = normalize([{ op: "add", path: "/a/todos/-", value: 1 }]);
    expect(out.delta).toEqual([]);
    expect(out.skipped.map((s) => s.code)).toEqual(["PATH_NOT_FOUND"]);
  });
  it("turns a replace of a missing member into add, but not a replace of a missing array element", () => {
    const out = normalize([{ op: "replace", path: "/x", value: 1 }, { op: "replace", path: "/arr/5", value: 1 }], { arr: [] });
    expect(out.delta).toEqual([{ op: "add", path: "/x", value: 1 }]);
    expect(out.skipped.map((s) => s.code)).toEqual(["INDEX_OUT_OF_BOUNDS"]);
  });
  it("escapes array paths and leaves test ops out of the delta", () => {
    const out = normalize([{ op: "add", path: ["tool", "raster-ops/dataset", "~x"], value: 1 }, { op: "test", path: "/tool", value: { "raster-ops/dataset": { "~x": 1 } } }], { tool: { "raster-ops/dataset": {} } });
    expect(out.delta).toEqual([{ op: "add", path: "/tool/raster-ops~1dataset/~0x", value: 1 }]);
    expect(out.skipped).toEqual([]);
  });
});

describe("byte accounting", () => {
  it("counts numbers as JSON.stringify writes them, plus one separator per member or element", () => {
    for (const n of [0, 7, 42, 999, 1000, 1234, 99_999, 100_000, 123_456_789, 999_999_999, 1e9, -5, 1.5, 1e21]) {
      expect(measure({ n }).bytes, String(n)).toBe(JSON.stringify({ n }).length + 1);
    }
  });
});
