import { describe, expect, it } from "vitest";
import fc from "fast-check";
import jsonpatch from "fast-json-patch";
import { JsonDocument, cloneJson, decodeOps, isObject, measure, normalize, type Json, type JsonObject, type StateLimits } from "../../src/core/index.js";
import { jsonObject, opsFor } from "../../scripts/harness/arbitraries.js";
import { sameJson } from "../../scripts/harness/json.js";

/**
 * Issue 22 §4, protocol/README.md §5 rule 8: an op that leaves the document
 * as it was is neither applied, nor sent, nor skipped.
 */

const params = { numRuns: Number(process.env["FC_RUNS"] ?? 400) };

const STATE: JsonObject = { a: 1, s: "x", o: { x: 1, y: [1, { p: 1, q: 2 }] }, arr: [5, 5, 5, 6], m: { p: 1, q: [2] }, n: { q: [2], p: 1 }, "-": 0 };

/** normalize, with the state given and its text checked to be left as it was when nothing moved. */
function run(ops: unknown[], state: JsonObject = STATE) {
  const before = JSON.stringify(state);
  const out = normalize(ops, state);
  expect(JSON.stringify(state), "normalize does not touch its argument").toBe(before);
  return out;
}

describe("an op that leaves the document as it was is not sent", () => {
  const silent: [string, unknown][] = [
    ["a replace with the value there", { op: "replace", path: "/a", value: 1 }],
    ["a replace of an array element with the value there", { op: "replace", path: "/arr/3", value: 6 }],
    ["an add on an object member with the value there", { op: "add", path: "/s", value: "x" }],
    ["an add on a member named -", { op: "add", path: "/-", value: 0 }],
    ["a replace of a member named - (emitted as an add when it moves)", { op: "replace", path: "/-", value: 0 }],
    ["a replace with an equal value whose members come in another order, nested", { op: "replace", path: "/o", value: { y: [1, { q: 2, p: 1 }], x: 1 } }],
    ["a replace given as a Path", { op: "replace", path: ["o", "y", 1], value: { q: 2, p: 1 } }],
    ["a move onto itself", { op: "move", from: "/o/x", path: "/o/x" }],
    ["a move onto its own array element", { op: "move", from: "/arr/1", path: "/arr/1" }],
    ["a move within an array across equal elements", { op: "move", from: "/arr/0", path: "/arr/2" }],
    ["the same, backwards", { op: "move", from: "/arr/2", path: "/arr/0" }],
    ["a copy onto an object member that holds an equal value", { op: "copy", from: "/m", path: "/n" }],
    ["a copy onto its own object member", { op: "copy", from: "/m", path: "/m" }],
    ["a replace of the root with an equal object", { op: "replace", path: "", value: cloneJson(STATE) }],
  ];
  for (const [what, op] of silent) {
    it(`${what}: delta [], no skip, the state as it was`, () => {
      const out = run([op]);
      expect(out.delta).toEqual([]);
      expect(out.skipped).toEqual([]);
      expect(JSON.stringify(out.state)).toBe(JSON.stringify(STATE));
    });
  }

  const moving: [string, unknown, unknown[]][] = [
    ["an add into an array inserts, even a value equal to the element there", { op: "add", path: "/arr/0", value: 5 }, [{ op: "add", path: "/arr/0", value: 5 }]],
    ["an append of an equal value", { op: "add", path: "/arr/-", value: 6 }, [{ op: "add", path: "/arr/-", value: 6 }]],
    ["a copy onto its own array element inserts a second copy (RFC 6902 §4.5)", { op: "copy", from: "/arr/3", path: "/arr/3" }, [{ op: "copy", from: "/arr/3", path: "/arr/3" }]],
    ["a copy onto an array element equal to it inserts too", { op: "copy", from: "/arr/0", path: "/arr/1" }, [{ op: "copy", from: "/arr/0", path: "/arr/1" }]],
    ["a move within an array past an element that differs", { op: "move", from: "/arr/0", path: "/arr/3" }, [{ op: "move", from: "/arr/0", path: "/arr/3" }]],
    ["a move to the end past an element that differs", { op: "move", from: "/arr/2", path: "/arr/-" }, [{ op: "move", from: "/arr/2", path: "/arr/-" }]],
    ["a move of a member onto another equal one removes the first", { op: "move", from: "/m", path: "/n" }, [{ op: "move", from: "/m", path: "/n" }]],
    ["a replace with a value of another type", { op: "replace", path: "/a", value: "1" }, [{ op: "replace", path: "/a", value: "1" }]],
    ["a replace with an array in another order", { op: "replace", path: "/o/y", value: [{ p: 1, q: 2 }, 1] }, [{ op: "replace", path: "/o/y", value: [{ p: 1, q: 2 }, 1] }]],
  ];
  for (const [what, op, delta] of moving) {
    it(`${what}: sent`, () => {
      const out = run([op]);
      expect(out.delta).toEqual(delta);
      expect(out.skipped).toEqual([]);
      expect(sameJson(jsonpatch.applyPatch(cloneJson(STATE), cloneJson(out.delta as Json) as unknown as jsonpatch.Operation[], true, false).newDocument, out.state)).toBe(true);
    });
  }

  it("a move to the end across equal elements is silent: the element comes back where it was", () => {
    expect(run([{ op: "move", from: "/arr/1", path: "/arr/-" }], { arr: [1, 2, 2] }).delta).toEqual([]);
    expect(run([{ op: "move", from: "/arr/0", path: "/arr/-" }], { arr: [1, 2, 2] }).delta).toEqual([{ op: "move", from: "/arr/0", path: "/arr/-" }]);
  });

  it("is judged against the state as earlier ops left it", () => {
    const out = run([
      { op: "replace", path: "/a", value: 2 },
      { op: "replace", path: "/a", value: 2 },
      { op: "add", path: "/a", value: 1 },
    ]);
    expect(out.delta).toEqual([
      { op: "replace", path: "/a", value: 2 },
      { op: "add", path: "/a", value: 1 },
    ]);
    expect(out.state).toEqual(STATE);
  });

  it("an op that fails a check before the state is still skipped, equal value or not", () => {
    const state = JSON.parse('{"o":{"__proto__":1},"a":1}') as JsonObject;
    const out = run([{ op: "replace", path: "/o/__proto__", value: 1 }, { op: "copy", from: "/o/__proto__", path: "/a" }, { op: "replace", path: "/a/", value: 1 }], state);
    expect(out.skipped.map((s) => s.code)).toEqual(["FORBIDDEN_KEY", "FORBIDDEN_KEY", "PATH_NOT_FOUND"]);
    expect(out.delta).toEqual([]);
  });

  it("a path deeper than maxDepth is LIMIT_EXCEEDED, not silent", () => {
    const limits: StateLimits = { maxDepth: 2, maxStateBytes: Infinity };
    const out = normalize([{ op: "replace", path: "/a/b/c", value: 1 }], { a: { b: { c: 1 } } }, limits);
    expect(out.skipped.map((s) => s.code)).toEqual(["LIMIT_EXCEEDED"]);
  });

  it("a missing from is still FROM_NOT_FOUND, a missing target still PATH_NOT_FOUND", () => {
    const out = run([{ op: "copy", from: "/zz", path: "/a" }, { op: "move", from: "/arr/9", path: "/arr/0" }, { op: "replace", path: "/zz/a", value: 1 }]);
    expect(out.skipped.map((s) => s.code)).toEqual(["FROM_NOT_FOUND", "FROM_NOT_FOUND", "PATH_NOT_FOUND"]);
  });
});

describe("in the engine's whole patches", () => {
  const ops = [
    { op: "replace", path: "/a", value: 1 },
    { op: "copy", from: "/m", path: "/n" },
    { op: "add", path: "/s", value: "x" },
  ];

  it("atomic: equal writes do not fail the patch, and nothing is applied", () => {
    const doc = new JsonDocument(cloneJson(STATE));
    const out = doc.applyAtomic(decodeOps(ops));
    expect(out).toEqual({ ok: true, value: [] });
    expect(JSON.stringify(doc.root)).toBe(JSON.stringify(STATE));
    expect(doc.bytes).toBe(measure(STATE).bytes);
  });

  it("atomic: equal writes beside a change send only the change, and a later failure rolls it back", () => {
    const doc = new JsonDocument(cloneJson(STATE));
    const out = doc.applyAtomic(decodeOps([...ops, { op: "replace", path: "/a", value: 3 }]));
    expect(out.ok && out.value.map((o) => o.op)).toEqual(["replace"]);
    const failed = doc.applyAtomic(decodeOps([...ops, { op: "remove", path: "/gone" }]));
    expect(failed.ok).toBe(false);
    expect(doc.root).toEqual({ ...STATE, a: 3 });
  });

  it("lenient: equal writes are neither applied nor skipped", () => {
    const doc = new JsonDocument(cloneJson(STATE));
    expect(doc.applyLenient(decodeOps(ops), ops)).toEqual({ applied: [], skipped: [] });
  });

  it("without the §5 rules (ops the service builds), an equal write is applied as given", () => {
    const doc = new JsonDocument(cloneJson(STATE));
    const out = doc.applyAtomic(decodeOps(ops.slice(0, 1)), { normalize: false });
    expect(out.ok && out.value.length).toBe(1);
  });
});

describe("properties", () => {
  it("every op of a normalized delta moves the document (fast-json-patch, op by op), and the delta lands on the state", () => {
    fc.assert(
      fc.property(
        jsonObject.chain((s) => fc.tuple(fc.constant(s), opsFor(s))),
        ([state, ops]) => {
          const out = normalize(ops, state);
          let doc: unknown = cloneJson(state);
          for (const op of out.delta) {
            const next = jsonpatch.applyPatch(structuredClone(doc), [structuredClone(op) as jsonpatch.Operation], true, false).newDocument;
            expect(sameJson(next, doc), `${JSON.stringify(op)} leaves ${JSON.stringify(doc)} as it was`).toBe(false);
            doc = next;
          }
          expect(sameJson(doc, out.state)).toBe(true);
        },
      ),
      params,
    );
  });

  it("writing back what is there, anywhere but the root and array inserts, sends nothing and leaves the text as it was", () => {
    fc.assert(
      fc.property(
        jsonObject.filter((s) => Object.keys(s).length > 0),
        fc.nat(),
        fc.boolean(),
        (state, pick, asAdd) => {
          const at = members(state);
          const [path, value, inArray] = at[pick % at.length] as [string[], Json, boolean];
          const op = asAdd && !inArray ? "add" : "replace";
          const out = normalize([{ op, path, value: reorder(cloneJson(value)) }], state);
          expect(out.delta).toEqual([]);
          expect(out.skipped.filter((s) => s.code !== "FORBIDDEN_KEY")).toEqual([]);
          expect(JSON.stringify(out.state)).toBe(JSON.stringify(state));
        },
      ),
      params,
    );
  });
});

/** Every non-root location of a value: its path, its value, and whether it is an array element. */
function members(v: Json, base: string[] = []): [string[], Json, boolean][] {
  const out: [string[], Json, boolean][] = [];
  if (Array.isArray(v)) v.forEach((x, i) => out.push([[...base, String(i)], x, true], ...members(x, [...base, String(i)])));
  else if (isObject(v)) for (const k of Object.keys(v)) out.push([[...base, k], v[k] as Json, false], ...members(v[k] as Json, [...base, k]));
  return out;
}

/** The same value with every object's members in reverse order. */
function reorder(v: Json): Json {
  if (Array.isArray(v)) return v.map(reorder);
  if (!isObject(v)) return v;
  const out: JsonObject = {};
  for (const k of Object.keys(v).reverse()) Object.defineProperty(out, k, { value: reorder(v[k] as Json), enumerable: true, writable: true, configurable: true });
  return out;
}
