import { beforeEach, describe, expect, it, vi } from "vitest";
import { JsonDocument, decodeOps, type Json, type StateLimits } from "../../src/core/index.js";
import type * as JsonModule from "../../src/core/json.js";
import type * as MeasureModule from "../../src/core/measure.js";
import { chain, value64k } from "./crossing.js";

/**
 * The copy and move bombs, in process, with the work they cost counted
 * rather than timed: the core's two walks over a value, measure() (the JSON
 * size and nesting of what an op would write) and cloneJson() (the copy it
 * writes), are wrapped to add up the bytes they cover. A bomb must be refused
 * before memory is spent on it, and no op may walk more than the limits let
 * it. test/hardening/limits-state.test.ts plays the same bombs against the
 * binary; `npm run bench` (H1, H2) reports what they cost in time.
 */

const work = vi.hoisted(() => ({ walked: 0, walks: 0, cloned: 0 }));

vi.mock("../../src/core/measure.js", async (importOriginal) => {
  const m = await importOriginal<typeof MeasureModule>();
  return {
    ...m,
    measure: (value: Json, maxDepth?: number, maxBytes?: number) => {
      const out = m.measure(value, maxDepth, maxBytes);
      // What the walk counted is what it covered: it stops once a limit is passed.
      work.walked += out.bytes;
      work.walks++;
      return out;
    },
  };
});

vi.mock("../../src/core/json.js", async (importOriginal) => {
  const j = await importOriginal<typeof JsonModule>();
  const { measure } = await vi.importActual<typeof MeasureModule>("../../src/core/measure.js");
  return {
    ...j,
    cloneJson: (v: Json) => {
      work.cloned += measure(v).bytes;
      return j.cloneJson(v);
    },
  };
});

beforeEach(() => Object.assign(work, { walked: 0, walks: 0, cloned: 0 }));

/** Applies `ops` leniently to `state` (the walks of the new document left out of the count) and returns the outcome. */
function apply(state: Json, ops: unknown[], limits: StateLimits) {
  const doc = new JsonDocument(state);
  const start = doc.bytes;
  Object.assign(work, { walked: 0, walks: 0, cloned: 0 });
  const out = doc.applyLenient(decodeOps(ops), ops, { limits });
  return { doc, start, applied: out.applied.length, skipped: out.skipped };
}

const MiB = 1024 * 1024;
/**
 * How far past the room left a walk may count before it stops: it adds an
 * array's separators at once (2,000 for value64k) and checks after each
 * element, so one step is at most that plus one element.
 */
const ONE_STEP = 4 * 1024;

describe("bombs cost bounded work (counted in process)", () => {
  it("a copy bomb (30 doubling copies of a 64 KB root under a 4 MiB limit) clones no more than its copies that apply", () => {
    const limits: StateLimits = { maxDepth: 256, maxStateBytes: 4 * MiB };
    const ops = Array.from({ length: 30 }, (_, i) => ({ op: "copy", from: "", path: `/k${i}` }));
    const r = apply({ v: value64k() } as Json, ops, limits);
    expect(r.applied).toBeGreaterThanOrEqual(5);
    expect(r.skipped.map((s) => s.code)).toEqual(Array.from({ length: 30 - r.applied }, () => "LIMIT_EXCEEDED"));
    const { cloned, walked } = work;
    // Bytes copied: exactly what the copies that apply copy on their own (into the mirror, and
    // for the delta). A refused copy clones nothing; 25 refused copies of the 2 MB root would be 50 MB.
    apply({ v: value64k() } as Json, ops.slice(0, r.applied), limits);
    expect(work.cloned).toBeGreaterThan(0);
    expect(cloned).toBe(work.cloned);
    // Bytes walked: each copy is counted at most up to the room it had, plus one step.
    expect(walked).toBeLessThanOrEqual(ops.length * (limits.maxStateBytes - r.start + ONE_STEP));
  });

  it("30 copies of a 3.9 MB member into a thread with 100 KB of room clone nothing and walk only the room each", () => {
    const limits: StateLimits = { maxDepth: 256, maxStateBytes: 4 * MiB };
    // An object, not an array: counting adds a member at a time (an array's separators all at once).
    const rows = Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`r${i}`, { i, s: "abcdefghijklmnopqrstuvwxyz0123456789" }]));
    const r = apply({ rows } as Json, [], limits);
    const room = limits.maxStateBytes - r.doc.bytes;
    expect(room).toBeGreaterThan(0);
    expect(room).toBeLessThan(r.doc.bytes / 10);
    const bomb = apply({ rows } as Json, Array.from({ length: 30 }, (_, i) => ({ op: "copy", from: "/rows", path: `/c${i}` })), limits);
    expect(bomb.skipped).toHaveLength(30);
    expect(work.cloned).toBe(0);
    // Counted in full, each refusal would walk all 3.9 MB: 117 MB in all.
    expect(work.walked).toBeLessThanOrEqual(30 * (room + ONE_STEP));
  });

  it("a move bomb (759 moves deepening a 64 KB value to the depth limit, then 152 past it) walks the document a handful of times, not once per move", () => {
    const limits: StateLimits = { maxDepth: 256, maxStateBytes: 32 * MiB };
    const round = [
      { op: "add", path: "/w", value: {} },
      { op: "move", from: "/x", path: "/w/x" },
      { op: "move", from: "/w", path: "/x" },
    ];
    const deeper = [
      ...Array.from({ length: 50 }, (_, i) => [{ op: "add", path: `/w${i}`, value: {} }, { op: "move", from: "/x", path: `/w${i}/x` }]).flat(),
      ...Array.from({ length: 100 }, (_, i) => ({ op: "move", from: "/x", path: "/c" + "/a".repeat(i) + "/x" })),
      { op: "move", from: "/x/x", path: "/up" },
      { op: "move", from: "/up", path: "/c/a/up" },
    ];
    const ops = [...Array.from({ length: 253 }, () => round).flat(), ...deeper];
    const r = apply({ x: value64k(), c: chain(100) } as Json, ops, limits);
    expect(r.skipped).toHaveLength(151);
    // A move never clones, the value changes place: only the adds of {} (2 bytes each) copy anything.
    expect(work.cloned).toBe(2 * ops.filter((o) => o.op === "add").length);
    // Walking the moved value on every deepening move would cover 911 x 64 KB; the depth bound
    // is made exact only when it no longer proves the move safe.
    const moves = ops.filter((o) => o.op === "move").length;
    expect(work.walked).toBeLessThan((moves / 20) * r.doc.bytes);
  });

  it("2,500 deepening moves of a 200,000-member value walk it once per ~250 moves (when the depth bound runs out), not once per move", () => {
    const limits: StateLimits = { maxDepth: 256, maxStateBytes: 32 * MiB };
    const big: Record<string, number> = {};
    for (let i = 0; i < 200_000; i++) big[`m${i}`] = i;
    const ops = Array.from({ length: 2500 }, () => [
      { op: "move", from: "/big", path: "/w/big" },
      { op: "move", from: "/w/big", path: "/big" },
    ]).flat();
    const r = apply({ big, w: {} }, ops, limits);
    expect(r.skipped).toEqual([]);
    expect(r.applied).toBe(5000);
    // Each deepening move raises the document's depth bound by one; only when the bound passes
    // maxDepth is the document measured again (exactly 3 deep). Before the fix each of the 2,500
    // moves walked all 3 MB of the value: 2,500 walks instead of about 10.
    const deepening = 2500;
    const exactDepth = 3;
    expect(work.walked).toBeGreaterThan(0);
    expect(work.walked).toBeLessThanOrEqual((Math.ceil(deepening / (limits.maxDepth - exactDepth)) + 1) * r.doc.bytes);
    expect(work.cloned).toBe(0);
  });
});
