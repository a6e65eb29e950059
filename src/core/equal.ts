import { IntegralFloat, numberIn } from "./float.js";
import { hasMember, isObject, type Json } from "./json.js";

/**
 * JSON equality (protocol/README.md §3): object member order does not matter, numbers
 * compare by value (`1` equals `1.0`, an IntegralFloat), arrays compare in order.
 * Only own members count.
 */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || a instanceof IntegralFloat || b instanceof IntegralFloat) return sameNumber(a, b);
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i] as Json, b[i] as Json)) return false;
    return true;
  }
  if (!isObject(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const k of keys) {
    if (!hasMember(b, k) || !jsonEqual(a[k] as Json, b[k] as Json)) return false;
  }
  return true;
}

/** Two values that are not both containers: equal only as numbers (`1` and `1.0`), strings and the rest having been compared by `===`. */
function sameNumber(a: Json, b: Json): boolean {
  const x = numberIn(a);
  return x !== undefined && x === numberIn(b);
}
