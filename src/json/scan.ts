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
 */
export function scanJson(value: unknown, maxNesting: number): ScanProblem | undefined {
  const path: string[] = [];
  let found: ScanProblem | undefined;
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
        path.push(String(i));
        walk(v[i], depth + 1);
        path.pop();
      }
      return;
    }
    for (const k in v) {
      path.push(k);
      walk((v as Record<string, unknown>)[k], depth + 1);
      path.pop();
      if (found) return;
    }
  };
  walk(value, 0);
  return found;
}

/**
 * Whether text holds at least `maxNesting` opening brackets: a value cannot
 * nest `maxNesting` deep with fewer, so text with fewer needs no nesting walk.
 * (Brackets inside strings count too, which can only send more text to the
 * walk, never less.) Two native searches per bracket, stopping at the limit:
 * far cheaper for a typical request than the walk it saves (docs/benchmarks.md,
 * "Figures behind choices in the source").
 */
export function mayNestPast(text: string, maxNesting: number): boolean {
  let n = 0;
  for (let i = text.indexOf("{"); i !== -1 && n < maxNesting; i = text.indexOf("{", i + 1)) n++;
  for (let i = text.indexOf("["); i !== -1 && n < maxNesting; i = text.indexOf("[", i + 1)) n++;
  return n >= maxNesting;
}
