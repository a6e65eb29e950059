import { IntegralFloat } from "../core/index.js";
import { Float } from "./stringify.js";

/**
 * JSON.parse that keeps a number the value and the kind it came with
 * (protocol/README.md §3, Numbers), so that what the sidecar writes back
 * reads, in Python, Go (UseNumber) and Clojure, as the token that came in:
 * - An integer token (no fraction, no exponent) beyond ±(2^53 − 1), such as a
 *   Python id 2^60, has no exact double in general and is written back by
 *   JavaScript as other digits (1152921504606847000) or as a float (1e+21).
 *   It is replaced by an UnsafeNumber marker, which the params scan refuses.
 * - A token beyond a double's range, such as 1e400, would parse to Infinity
 *   and be sent on as null: an UnsafeNumber marker (overflow) too.
 * - A float token (a fraction or an exponent) whose value is whole, such as
 *   Python's `1.0` or `1e2`, would be written back as `1` or `100`, an integer
 *   to every other reader: it becomes an IntegralFloat (src/core/float.ts),
 *   written back as `1.0` or `100.0` (stringify.ts).
 * Every other number is a double that JavaScript writes back as the shortest
 * text that reads as the same double, of the same kind: an integer as digits,
 * a fraction with its point or exponent.
 *
 * Only text that mayHoldUnsafeNumber says may hold such a token is read
 * again, by a small tokenizer. (JSON.parse's source-text access would do it, but on
 * Node 20 it needs a V8 flag that, set at run time, slows every JSON.parse in
 * the process: docs/benchmarks.md has the figures.)
 */
export class UnsafeNumber {
  constructor(
    readonly source: string,
    /** Beyond a double's range, rather than an integer beyond 2^53 − 1. */
    readonly overflow: boolean,
  ) {}
}

/**
 * Candidates for a number token that may need a marker: a digit followed by
 * an exponent or a point, or 16 digits in a row (9007199254740991, the last
 * safe integer, has 16; so does 2^53). One regular expression, because a native scan is
 * what keeps a message without such a token cheap; each candidate is then
 * judged by mayNeedMarker. (Every JSON-RPC message has one: `"2.0"`.)
 */
const CANDIDATE = /\d(?:[eE.]|\d{15})/g;
const INTEGER_TOKEN = /^-?\d+$/;

/** Whether text may hold a number token that parseJson must mark; parseJson looks again only at such text. */
export function mayHoldUnsafeNumber(text: string): boolean {
  CANDIDATE.lastIndex = 0;
  for (let m = CANDIDATE.exec(text); m !== null; m = CANDIDATE.exec(text)) {
    if (mayNeedMarker(text, m.index)) return true;
    // A run of digits that is no token's integer part (a fraction's, or in a
    // string): go on from its last digit, which may come before an exponent.
    if (m[0].length > 2) {
      let last = m.index + 15;
      while (isDigit(text.charCodeAt(last + 1))) last++;
      CANDIDATE.lastIndex = last;
    }
  }
  return false;
}

const isDigit = (c: number): boolean => c >= 0x30 && c <= 0x39;

/**
 * Whether the candidate at `at` (a digit, then another character) may be part
 * of a number token that needs a marker. It must stand in a token, which
 * starts the text or follows `:`, `,`, `[` or white space (a version "2.0" or
 * an id "550e8400" in a string does not), and then have:
 * - 16 digits in a row before any point: an integer beyond 2^53 − 1, or a
 *   long mantissa that may overflow;
 * - an exponent: it may overflow (1e400) or be whole (1e2, 1.5e3, 1e-400);
 * - a fraction of zeros only: whole (1.0);
 * - a fraction that rounds to a whole double (0.99999999999999999): that
 *   takes 17 significant digits or more, and a fraction that starts with 0
 *   or 9, since the double must be within 1/16 of a whole number (2^-4 is
 *   half the spacing of doubles below 10^15; from 16 digits on, the first
 *   rule applies). A random float such as 0.8444218515250481 is not one.
 * A fraction's own digits are judged at its point, which comes first.
 */
function mayNeedMarker(text: string, at: number): boolean {
  const next = text.charCodeAt(at + 1);
  let start = at;
  while (start > 0 && isDigit(text.charCodeAt(start - 1))) start--;
  if (start > 0 && text.charCodeAt(start - 1) === 0x2e) {
    if (isDigit(next)) return false;
    // An exponent after a fraction (1.5e3): the token starts before the point.
    start--;
    while (start > 0 && isDigit(text.charCodeAt(start - 1))) start--;
  }
  if (start > 0 && text.charCodeAt(start - 1) === 0x2d) start--;
  if (start > 0) {
    const c = text.charCodeAt(start - 1);
    if (c !== 0x3a && c !== 0x2c && c !== 0x5b && c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return false;
  }
  if (next !== 0x2e) return true;
  let end = at + 2;
  while (isDigit(text.charCodeAt(end))) end++;
  const fraction = text.slice(at + 2, end);
  if (/^0+$/.test(fraction)) return true;
  const first = fraction.charCodeAt(0);
  return (first === 0x30 || first === 0x39) && end - start >= 18;
}

const own = Object.prototype.hasOwnProperty;

/** Parses JSON text; throws SyntaxError like JSON.parse. `check` false skips the second look (the caller ran mayHoldUnsafeNumber). */
export function parseJson(text: string, check = mayHoldUnsafeNumber(text)): unknown {
  const value: unknown = JSON.parse(text);
  if (!check) return value;
  let root = value;
  for (const { path, marker } of markedNumbers(text)) {
    if (path.length === 0) {
      root = marker;
      continue;
    }
    // Follow own members only: a path can name __proto__, which JSON.parse
    // made an own member. A member given twice holds its last value, and the
    // tokenizer reports only tokens that value holds (markedNumbers).
    let parent: unknown = value;
    for (let i = 0; i < path.length - 1 && parent !== undefined; i++) {
      parent = typeof parent === "object" && parent !== null && own.call(parent, path[i] as string) ? (parent as Record<string, unknown>)[path[i] as string] : undefined;
    }
    const key = path[path.length - 1] as string;
    if (typeof parent !== "object" || parent === null || !own.call(parent, key)) continue;
    Object.defineProperty(parent, key, { value: marker, writable: true, enumerable: true, configurable: true });
  }
  return root;
}

type Level = { array: true; index: number; from: number } | { array: false; key: string; expectKey: boolean; from: number; keys: Set<string> | undefined };

export interface MarkedNumber {
  /** Member names and array indexes from the root. */
  path: string[];
  marker: UnsafeNumber | IntegralFloat;
}

/**
 * The number tokens of valid JSON text that parseJson replaces, with their
 * paths, in text order. A token inside a member whose name is given again
 * later in the same object is left out: JSON.parse keeps the last one (RFC
 * 8259 §4 leaves repeated names to the parser), and the kept value may hold a
 * token of the other kind at the same path.
 */
export function markedNumbers(text: string): MarkedNumber[] {
  const found: (MarkedNumber | undefined)[] = [];
  const stack: Level[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) j += 2;
        else if (d === 0x22) break;
        else j++;
      }
      const top = stack[stack.length - 1];
      if (top && !top.array && top.expectKey) {
        const key = JSON.parse(text.slice(i, j + 1)) as string;
        if (top.keys?.has(key)) dropUnder(found, top.from, stack.length - 1, key);
        top.key = key;
        top.expectKey = false;
      }
      i = j + 1;
    } else if (c === 0x7b) {
      stack.push({ array: false, key: "", expectKey: true, from: found.length, keys: undefined });
      i++;
    } else if (c === 0x5b) {
      stack.push({ array: true, index: 0, from: found.length });
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      i++;
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top?.array) top.index++;
      else if (top) {
        // Names are remembered only in an object that has marked tokens below it: the rare case.
        if (found.length > top.from) (top.keys ??= new Set()).add(top.key);
        top.expectKey = true;
      }
      i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < n && isNumberChar(text.charCodeAt(j))) j++;
      const token = text.slice(i, j);
      const marker = markerFor(token);
      if (marker) found.push({ path: stack.map((l) => (l.array ? String(l.index) : l.key)), marker });
      i = j;
    } else i++;
  }
  return found.filter((f) => f !== undefined);
}

/** The marker a number token needs, if any (protocol/README.md §3). */
export function markerFor(token: string): UnsafeNumber | IntegralFloat | undefined {
  const value = Number(token);
  if (!Number.isFinite(value)) return new UnsafeNumber(token, true);
  if (INTEGER_TOKEN.test(token)) return Number.isSafeInteger(value) ? undefined : new UnsafeNumber(token, false);
  // A float with a whole value that JavaScript writes without a point or an
  // exponent; from 1e21 up it writes an exponent (1e+21), a float to every reader.
  return Number.isInteger(value) && Math.abs(value) < 1e21 ? new Float(value) : undefined;
}

/** Forgets the tokens found since `from` whose path goes through `key` at `depth`: that member is given again. */
function dropUnder(found: (MarkedNumber | undefined)[], from: number, depth: number, key: string): void {
  for (let k = from; k < found.length; k++) if (found[k]?.path[depth] === key) found[k] = undefined;
}

function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}

/**
 * The value with every IntegralFloat replaced, in place, by the number it
 * holds: for a model of a JavaScript peer (`check --state`, `fix --state`),
 * whose JSON.parse reads `1.0` as 1. Recursion is bounded by the nesting
 * scanJson has checked.
 */
export function plainNumbers(value: unknown): unknown {
  if (value instanceof IntegralFloat) return value.value;
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = plainNumbers(value[i]);
    return value;
  }
  for (const k of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[k];
    if (typeof v === "object" && v !== null) Object.defineProperty(value, k, { value: plainNumbers(v), writable: true, enumerable: true, configurable: true });
  }
  return value;
}
