import { expect } from "vitest";
import type { Peer } from "../../scripts/harness/peer.js";

/**
 * protocol/README.md §7 against the real binary, at and just past each edge
 * (test/hardening/limits-*.test.ts). Every crossing is answered with -32003
 * LIMIT_EXCEEDED {limit, max, actual} (or a LIMIT_EXCEEDED skip where §7 says
 * a single op is skipped), changes nothing, and leaves other threads alone: a
 * sentinel thread is read before and after every crossing and must not move.
 */

export type Json = unknown;
export type Err = { code: number; message: string; data?: Record<string, unknown> };

export const SENTINEL = { threadId: "sentinel", state: { keep: [1, 2, 3], deep: { a: { b: "c" } } }, toolState: { "k/1": "v", "m~n": [0.5, null] } };

/** Opens the sentinel thread and returns what getState says about it. */
export async function openSentinel(s: Peer): Promise<Record<string, unknown>> {
  await s.ok("openRun", SENTINEL);
  const got = await s.ok("getState", { threadId: "sentinel" });
  expect(got).toEqual({ version: 1, state: { ...SENTINEL.state, toolState: SENTINEL.toolState } });
  return got;
}

/** Runs one crossing with the sentinel read just before and just after it. */
export async function crossing<T>(s: Peer, cross: () => Promise<T>): Promise<T> {
  const before = await s.ok("getState", { threadId: "sentinel" });
  const out = await cross();
  expect(await s.ok("getState", { threadId: "sentinel" }), "the sentinel thread moved").toEqual(before);
  return out;
}

export const limitData = (limit: string, max: number, actual: unknown = expect.any(Number)): Record<string, unknown> => ({ code: "LIMIT_EXCEEDED", limit, max, actual });

export function expectLimit(e: Err, limit: string, max: number, actual?: number): void {
  expect(e.code).toBe(-32003);
  expect(e.data).toEqual(limitData(limit, max, actual));
  if (actual === undefined) expect(e.data?.["actual"] as number).toBeGreaterThan(max);
}

/** A skip for a limit: no `op` echoed (protocol/README.md §4), the code, and a message. */
export const limitSkip = (index: number): unknown => ({ index, code: "LIMIT_EXCEEDED", message: expect.any(String) });

/** A value nested `depth` containers deep (`{}` is 1, `{"a":{}}` is 2), alternating objects and arrays. */
export function nested(depth: number, leaf: unknown = 1): unknown {
  let v: unknown = depth > 0 ? (depth % 2 ? { x: leaf } : [leaf]) : leaf;
  for (let d = depth - 1; d > 0; d--) v = d % 2 ? { x: v } : [v];
  return v;
}

/** An object chain {a:{a:…}} `depth` containers deep, with `leaf` innermost. */
export function chain(depth: number, leaf: Json = 1): Json {
  let v: Json = leaf;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

export function depthOf(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  let d = 0;
  for (const x of Object.values(v)) d = Math.max(d, depthOf(x));
  return d + 1;
}

/** A value of about 64 KB: 2,000 small objects, so a copy costs real memory (strings alone would be shared). */
export const value64k = (): Json => Array.from({ length: 2000 }, (_, i) => ({ i, s: "abcdefghijklmno" }));

/**
 * The figure a LIMIT_EXCEEDED skip reports, as its message spells it ("… (maxStateBytes 4194304,
 * got 4196542)"): the count reached when counting stopped, the same figure as data.actual of
 * -32003 (protocol/README.md §7), so a lower bound for a value far over the limit.
 */
export function reportedFigure(message: string): number {
  const m = /\(\w+ \d+, got (\d+)\)/.exec(message);
  if (!m) throw new Error(`no figure in ${JSON.stringify(message)}`);
  return Number(m[1]);
}
