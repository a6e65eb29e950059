import { describe, expect, it } from "vitest";
import fc from "fast-check";
import jsonpatch from "fast-json-patch";
import { JsonDocument, cloneJson, decodeOp, decodeOps, diffValue, formatPointer, jsonEqual, measure, normalize, parsePointer, toWireOp, type Json, type Op } from "../../src/core/index.js";
import { newDoc } from "../../src/core/apply.js";
import { applyAtomic, applyLenient } from "../../src/core/patch.js";
import { json, jsonObject, opsFor } from "../../scripts/harness/arbitraries.js";

// fast-check prints the seed and the counterexample path of any failure, so a case can be replayed.
const params = { numRuns: Number(process.env["FC_RUNS"] ?? 400) };

/** What @ag-ui/client does with a STATE_DELTA: applyPatch(state, delta, true, false). */
function clientApply(state: Json, delta: unknown[]): Json {
  return jsonpatch.applyPatch(state, delta as jsonpatch.Operation[], true, false).newDocument as Json;
}

describe("properties", () => {
  it("(a) the normalize delta applies with fast-json-patch as @ag-ui/client runs it and lands on the reported state", () => {
    fc.assert(
      fc.property(
        jsonObject.chain((s) => fc.tuple(fc.constant(s), opsFor(s))),
        ([state, ops]) => {
          const out = normalize(ops, state);
          // §5 rule 7: nothing emitted names the root, and no replace ends in "-" (python-json-patch refuses both).
          expect(out.delta.filter((o) => o.path === "" || ("from" in o && o.from === "") || (o.op === "replace" && o.path.endsWith("/-")))).toEqual([]);
          const client = clientApply(cloneJson(state), out.delta);
          expect(jsonEqual(client, out.state)).toBe(true);
          expect(JSON.stringify(client)).toBe(JSON.stringify(out.state));
        },
      ),
      params,
    );
  });

  it("an op decoded from a pointer string goes out with that string, which is the parsed path formatted again", () => {
    const token = fc.array(fc.constantFrom("a", "~", "/", "~0", "~1", "-", "0", "é", ""), { maxLength: 4 }).map((xs) => xs.join(""));
    fc.assert(
      fc.property(fc.array(token, { maxLength: 5 }), fc.constantFrom("add", "replace", "remove", "move", "copy"), (tokens, name) => {
        const pointer = formatPointer(tokens);
        const parsed = parsePointer(pointer);
        expect(parsed.ok && parsed.value).toEqual(tokens);
        const d = decodeOp({ op: name, path: pointer, from: "/x", value: 1 });
        if (!d.ok || d.value.op === "test") throw new Error("decodes");
        expect(toWireOp(d.value).path).toBe(pointer);
        // The same op with the path given as segments is formatted: the same text.
        const segments = decodeOp({ op: name, path: tokens, from: "/x", value: 1 });
        if (!segments.ok || segments.value.op === "test") throw new Error("decodes");
        expect(toWireOp(segments.value).path).toBe(pointer);
      }),
      params,
    );
  });

  it("(b) applying diffValue(a, b) to a gives b, with our engine and with fast-json-patch, and diffValue(b, b) is []", () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        const delta = diffValue(a, b);
        const doc = new JsonDocument(cloneJson(a));
        // Generated ops, applied as the service commits them: without the §5 rules, which are for ops as given.
        const out = doc.applyAtomic(delta.map((op: Op) => ({ ok: true as const, value: op })), { normalize: false });
        expect(out.ok).toBe(true);
        expect(jsonEqual(doc.root, b)).toBe(true);
        expect(jsonEqual(clientApply(cloneJson(a), delta.map(toWireOp)), b)).toBe(true);
        expect(diffValue(b, b)).toEqual([]);
      }),
      params,
    );
  });

  it("(b') diffValue's delta is never larger in JSON bytes than one replace of the changed value", () => {
    fc.assert(
      fc.property(json, json, fc.array(fc.constantFrom("a", "0"), { minLength: 1, maxLength: 3 }), (a, b, base) => {
        const wire = JSON.stringify(diffValue(a, b, base).map(toWireOp));
        const single = JSON.stringify([toWireOp({ op: "replace", path: base, value: b })]);
        expect(wire.length).toBeLessThanOrEqual(single.length);
      }),
      params,
    );
  });

  it("(c) normalize is idempotent: a normalized delta normalizes to itself with no skips", () => {
    fc.assert(
      fc.property(
        jsonObject.chain((s) => fc.tuple(fc.constant(s), opsFor(s))),
        ([state, ops]) => {
          const once = normalize(ops, state);
          const twice = normalize(once.delta, state);
          expect(twice.skipped).toEqual([]);
          expect(twice.delta).toEqual(once.delta);
          expect(jsonEqual(twice.state, once.state)).toBe(true);
        },
      ),
      params,
    );
  });

  it("the document's byte count stays exact and its nesting bound stays an upper bound, whatever applies or rolls back", () => {
    fc.assert(
      fc.property(
        jsonObject.chain((s) => fc.tuple(fc.constant(s), opsFor(s), fc.boolean())),
        ([state, ops, atomic]) => {
          // White-box: the engine's own record, which JsonDocument keeps private.
          const doc = newDoc(cloneJson(state));
          if (atomic) applyAtomic(doc, decodeOps(ops));
          else applyLenient(doc, decodeOps(ops), ops);
          const m = measure(doc.root);
          expect(doc.bytes).toBe(m.bytes);
          expect(doc.depth).toBeGreaterThanOrEqual(m.depth);
          if (!doc.loose) expect(doc.depth).toBe(m.depth);
        },
      ),
      params,
    );
  });

  it("atomic mode either applies everything the lenient pass applied, or leaves the document untouched", () => {
    fc.assert(
      fc.property(
        jsonObject.chain((s) => fc.tuple(fc.constant(s), opsFor(s))),
        ([state, ops]) => {
          const lenient = normalize(ops, state);
          const doc = new JsonDocument(cloneJson(state));
          const out = doc.applyAtomic(decodeOps(ops));
          if (out.ok) {
            expect(lenient.skipped).toEqual([]);
            expect(jsonEqual(doc.root, lenient.state)).toBe(true);
          } else {
            expect(out.error.index).toBe(lenient.skipped[0]?.index);
            expect(jsonEqual(doc.root, state)).toBe(true);
          }
        },
      ),
      params,
    );
  });
});
