import type { LimitHit, StateLimitName } from "./errors.js";
import { IntegralFloat } from "./float.js";
import type { Json } from "./json.js";

/**
 * Approximate JSON size and container nesting of a value. The byte figure
 * follows `JSON.stringify` for ASCII text, except that every member and element
 * counts a separator (one byte too many per non-empty container) and string
 * escapes and UTF-8 widths are not counted. Counting separators uniformly lets
 * the apply engine keep the figure exact under inserts and deletes without
 * re-measuring containers. It drives `--max-state-bytes` and `stats`, which only
 * need to be close, and it costs one walk instead of a serialization.
 */
export interface Measure {
  bytes: number;
  depth: number;
}

/**
 * Stops early, with `bytes > maxBytes` or `depth > maxDepth`, once a limit is
 * passed: a 30-fold copy bomb or a 5,000-deep value is refused after walking
 * at most the budget, not the whole value. Recursion is bounded by maxDepth.
 */
export function measure(value: Json, maxDepth = Infinity, maxBytes = Infinity): Measure {
  const m: Measure = { bytes: 0, depth: 0 };
  walk(value, 0, m, maxDepth, maxBytes);
  return m;
}

function walk(v: Json, level: number, m: Measure, maxDepth: number, maxBytes: number): void {
  switch (typeof v) {
    case "string":
      m.bytes += v.length + 2;
      return;
    case "number":
      m.bytes += numberBytes(v);
      return;
    case "boolean":
      m.bytes += v ? 4 : 5;
      return;
    default:
      break;
  }
  if (v === null) {
    m.bytes += 4;
    return;
  }
  if (v instanceof IntegralFloat) {
    m.bytes += v.text.length;
    return;
  }
  const depth = level + 1;
  if (depth > m.depth) m.depth = depth;
  if (depth > maxDepth) return;
  m.bytes += 2;
  if (Array.isArray(v)) {
    m.bytes += v.length * ELEMENT_OVERHEAD;
    for (let i = 0; i < v.length; i++) {
      walk(v[i] as Json, depth, m, maxDepth, maxBytes);
      if (m.bytes > maxBytes || m.depth > maxDepth) return;
    }
    return;
  }
  for (const k in v) {
    m.bytes += memberOverhead(k);
    walk(v[k] as Json, depth, m, maxDepth, maxBytes);
    if (m.bytes > maxBytes || m.depth > maxDepth) return;
  }
}

function numberBytes(n: number): number {
  // Small integers are by far the most common: count their digits without a string conversion.
  if (Number.isInteger(n) && n >= 0 && n < 1e9) {
    let digits = 1;
    for (let bound = 10; n >= bound; bound *= 10) digits++;
    return digits;
  }
  return String(n).length;
}

/** Bytes a member adds to its object besides its value: `"key":` and a comma. */
export const memberOverhead = (key: string): number => key.length + 4;
/** Bytes an element adds to its array besides its value: a comma. */
export const ELEMENT_OVERHEAD = 1;

/** The limits a whole state is held to (protocol/README.md §7). */
export interface StateLimits extends Record<StateLimitName, number> {
  /** Nesting of containers along any path, pointers included (--max-depth). */
  maxDepth: number;
  /** Approximate JSON bytes of the whole document (--max-state-bytes). */
  maxStateBytes: number;
}

/** Checks a whole state against the limits of a thread's state, walking no further than they allow. */
export function stateOverLimit(state: Json, limits: StateLimits): LimitHit | undefined {
  const m = measure(state, limits.maxDepth, limits.maxStateBytes);
  if (m.depth > limits.maxDepth) return { limit: "maxDepth", max: limits.maxDepth, actual: m.depth };
  if (m.bytes > limits.maxStateBytes) return { limit: "maxStateBytes", max: limits.maxStateBytes, actual: m.bytes };
  return undefined;
}
