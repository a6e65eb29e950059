import { describe, expect, it } from "vitest";
import jsonpatch from "fast-json-patch";
import { diffMembers, diffNamespace, diffValue, toWireOp, type Json } from "../../src/core/index.js";

const wire = (ops: ReturnType<typeof diffValue>) => ops.map(toWireOp);

describe("diffValue", () => {
  it("gives one op for an item prepended to a 10,000-element array, where fast-json-patch compare gives 10,001", () => {
    const a = Array.from({ length: 10_000 }, (_, i) => ({ id: i }));
    const b = [{ id: -1 }, ...a];
    expect(wire(diffValue({ items: a }, { items: b }))).toEqual([{ op: "add", path: "/items/0", value: { id: -1 } }]);
    expect(jsonpatch.compare({ items: a }, { items: b })).toHaveLength(10_001);
  });
  it("gives ops in proportion to removals at the start and appends at the end", () => {
    const a = Array.from({ length: 1000 }, (_, i) => i);
    expect(wire(diffValue(a, a.slice(2), ["xs"]))).toEqual([
      { op: "remove", path: "/xs/1" },
      { op: "remove", path: "/xs/0" },
    ]);
    expect(wire(diffValue(a, [...a, 1000], ["xs"]))).toEqual([{ op: "add", path: "/xs/1000", value: 1000 }]);
  });
  it("gives [] for equal values, whatever the member order and 1 vs 1.0", () => {
    expect(diffValue({ a: 1, b: [1, { c: 2 }] }, JSON.parse('{"b":[1.0,{"c":2}],"a":1.0}') as Json)).toEqual([]);
  });
  it("falls back to one replace when the ops would be larger", () => {
    const a = { v: [1, 2, 3, 4, 5, 6] };
    const b = { v: [9, 8, 7, 6, 5, 4] };
    expect(wire(diffValue(a, b))).toEqual([{ op: "replace", path: "/v", value: [9, 8, 7, 6, 5, 4] }]);
  });
  it("escapes member names", () => {
    expect(wire(diffValue({}, { "a/b": 1, "~": 2 }))).toEqual([
      { op: "add", path: "/a~1b", value: 1 },
      { op: "add", path: "/~0", value: 2 },
    ]);
  });
  it("never replaces the whole document when both roots are objects", () => {
    const ops = wire(diffValue({ a: 1, b: 2, c: 3 }, { x: 1, y: 2, z: 3 }));
    expect(ops.every((o) => o.path !== "")).toBe(true);
  });
  it("replaces the holder of a __proto__ member instead of naming it in a path", () => {
    const b = JSON.parse('{"o":{"__proto__":1}}') as Json;
    expect(wire(diffValue({ o: {} }, b))).toEqual([{ op: "replace", path: "/o", value: (b as Record<string, Json>)["o"] }]);
  });
});

describe("diffNamespace", () => {
  it("adds moved and new keys, removes vanished ones, is silent on equal ones, in code-unit order of the key", () => {
    const old = { b: 1, "raster-ops/dataset": "era5", same: { x: [1] }, gone: true };
    const next = { same: { x: [1.0] }, b: 2, "raster-ops/dataset": "era5", a: null, Z: 0 };
    expect(wire(diffNamespace(old, next, ["toolState"]))).toEqual([
      { op: "add", path: "/toolState/Z", value: 0 },
      { op: "add", path: "/toolState/a", value: null },
      { op: "add", path: "/toolState/b", value: 2 },
      { op: "remove", path: "/toolState/gone" },
    ]);
  });
  it("the set/remove form is silent on a rewrite to an equal value and on removing a missing key", () => {
    expect(diffMembers({ k: [0, 0, 10, 10] }, { k: [0, 0, 10, 10] }, ["missing"], ["toolState"])).toEqual([]);
  });
  it("sends the whole map as one add when a changed key is __proto__", () => {
    const set = JSON.parse('{"__proto__":{"x":1}}') as Record<string, Json>;
    const ops = wire(diffMembers({ a: 1 }, set, [], ["toolState"]));
    expect(ops).toHaveLength(1);
    expect(ops[0]?.path).toBe("/toolState");
    expect(JSON.stringify(ops[0])).toBe('{"op":"add","path":"/toolState","value":{"a":1,"__proto__":{"x":1}}}');
  });
});

describe("diffValue's size bound holds for a single op too", () => {
  it("sends one replace when the one remove it would send is larger (a long member name, a small value left)", () => {
    const ops = diffValue({ a: 1, "a-very-long-member-name": 2 }, { a: 1 }, ["p"]).map(toWireOp);
    expect(ops).toEqual([{ op: "replace", path: "/p", value: { a: 1 } }]);
  });
  it("keeps the one remove when it is the smaller", () => {
    expect(diffValue({ a: "a long value that costs more than the name", b: 1 }, { a: "a long value that costs more than the name" }, ["p"]).map(toWireOp)).toEqual([{ op: "remove", path: "/p/b" }]);
  });
});
