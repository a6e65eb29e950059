import { IntegralFloat, numberIn } from "./float.js";
import { hasMember, type Json } from "./json.js";

/**
 * JSON equality (protocol/README.md §3): object member order does not matter, numbers
 * compare by value (`1` equals `1.0`, an IntegralFloat), arrays compare in order.
 * Only own members count.
 */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return sameNumber(a, b);
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i] as Json, b[i] as Json)) return false;
    return true;
  }
  // Arrays are told apart first: an instanceof test costs more than Array.isArray, and a walk meets far more containers than floats.
  if (Array.isArray(b)) return false;
  if (a instanceof IntegralFloat || b instanceof IntegralFloat) return sameNumber(a, b);
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const k of keys) {
    if (!hasMember(b, k) || !jsonEqual(a[k] as Json, b[k] as Json)) return false;
  }
  return true;
}

/**
 * Two values that are not both containers, and not `===`: equal only as
 * numbers (`1` and `1.0`), strings and the rest having been compared by `===`.
 * Two plain numbers that are not `===` differ; the usual case of a changed
 * number is decided without an instanceof test.
 */
function sameNumber(a: Json, b: Json): boolean {
  if (typeof a === "number") return typeof b === "object" && b instanceof IntegralFloat && b.value === a;
  if (!(a instanceof IntegralFloat)) return false;
  const y = numberIn(b);
  return y !== undefined && a.value === y;
}
