import { escapeSegment, IntegralFloat } from "../core/index.js";
import { UnsafeNumber } from "./parse.js";

export type ScanProblem = { kind: "unsafe-integer" | "overflow"; field: string; source: string } | { kind: "too-deep"; depth: number };

/**
 * One bounded walk over a value parsed by parseJson, before anything else reads it:
 * - protocol/README.md §3: an integer token beyond ±(2^53 - 1) would be
 *   written back as other text (2^60 as 1152921504606847000).
 *   parseJson leaves an UnsafeNumber marker in its place (as it does for a
 *   literal beyond a double's range, such as 1e400, which would become null); it is refused here,
 *   naming its place, rather than stored changed. An IntegralFloat (`1.0`) is
 *   a number that passes.
 * - Nesting past `maxNesting` is refused here, so no later recursive walk can
 *   run out of stack. (The params walk allows --max-depth plus ENVELOPE_DEPTH, §7.)
 * - `asTheClientReads` names the top-level members that are a baseline, a state the client sent
 *   (§3): an unsafe integer in them is not refused but read as the client reads it.
 */
export function scanJson(value: unknown, maxNesting: number, asTheClientReads: (member: string) => boolean = NOWHERE): ScanProblem | undefined {
  const path: string[] = [];
  let found: ScanProblem | undefined;
  // Whether the value walked is a baseline (a member asTheClientReads names), read as the client holds it.
  let baseline = false;
  const walk = (v: unknown, depth: number): void => {
    if (found) return;
    if (typeof v !== "object" || v === null || v instanceof IntegralFloat) return;
    if (v instanceof UnsafeNumber) {
      found = { kind: v.overflow ? "overflow" : "unsafe-integer", field: path.map((s) => "/" + escapeSegment(s)).join(""), source: v.source };
      return;
    }
    if (depth >= maxNesting) {
      found = { kind: "too-deep", depth: depth + 1 };
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length && !found; i++) {
        if (baseline && clientsDouble(v, i)) continue;
        path.push(String(i));
        walk(v[i], depth + 1);
        path.pop();
      }
      return;
    }
    for (const k in v) {
      const record = v as Record<string, unknown>;
      if (depth === 0) baseline = asTheClientReads(k);
      if (baseline && clientsDouble(record, k)) continue;
      path.push(k);
      walk(record[k], depth + 1);
      path.pop();
      if (found) return;
    }
  };
  walk(value, 0);
  return found;
}

const NOWHERE = (): boolean => false;

/**
 * protocol/README.md §3, baselines: an integer beyond ±(2^53 − 1) in a state the client sent is the
 * double its JSON.parse holds for it (9007199254740993 is 9007199254740992), put in its marker's place.
 * A number beyond a double's range stays marked, and is refused: no client sends one (JSON.stringify
 * writes Infinity as null). True when it put one.
 */
function clientsDouble(holder: Record<string, unknown> | unknown[], at: string | number): boolean {
  const v = (holder as Record<string | number, unknown>)[at];
  if (!(v instanceof UnsafeNumber) || v.overflow) return false;
  (holder as Record<string | number, unknown>)[at] = Number(v.source);
  return true;
}

/**
 * Whether text holds at least `maxNesting` opening brackets: a value cannot
 * nest `maxNesting` deep with fewer, so text with fewer needs no nesting walk.
 * (Brackets inside strings count too, which can only send more text to the
 * walk, never less.) Two native searches per bracket, stopping at the limit:
 * far cheaper for a typical request than the walk it saves (docs/benchmarks.md,
 * "Figures behind choices in the source"). Text shorter than twice the limit
 * is not searched at all: JSON that nests that deep closes every bracket it
 * opens, and text that is not JSON is refused before any walk.
 */
export function mayNestPast(text: string, maxNesting: number): boolean {
  if (text.length < 2 * maxNesting) return false;
  let n = 0;
  for (let i = text.indexOf("{"); i !== -1 && n < maxNesting; i = text.indexOf("{", i + 1)) n++;
  for (let i = text.indexOf("["); i !== -1 && n < maxNesting; i = text.indexOf("[", i + 1)) n++;
  return n >= maxNesting;
}
