import { IntegralFloat } from "./float.js";

/**
 * JSON values as they come out of `JSON.parse`, plus the IntegralFloat that
 * src/json/parse.ts leaves for a float token with a whole value (`1.0`): a
 * number, not a container.
 */
export type Json = null | boolean | number | string | IntegralFloat | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof IntegralFloat);
}

const hasOwn = Object.prototype.hasOwnProperty;

/**
 * RFC 6901 §4 evaluates a token against the object's members, which are own
 * properties only: `/toString` does not exist on `{}`.
 */
export function hasMember(obj: JsonObject, key: string): boolean {
  return hasOwn.call(obj, key);
}

/**
 * Sets a member as an own, enumerable data property. A plain `obj[key] = v`
 * with key `__proto__` would call the inherited setter and swap the prototype;
 * defineProperty keeps it plain data.
 */
export function setMember(obj: JsonObject, key: string, value: Json): void {
  if (key === "__proto__") {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

/** Builds an object from entries; every member is an own data property, `__proto__` included. */
export function fromEntries(entries: Iterable<readonly [string, Json]>): JsonObject {
  const o: JsonObject = {};
  for (const [k, v] of entries) setMember(o, k, v);
  return o;
}

/**
 * Deep copy of a JSON value. Keys such as `__proto__` stay plain own data
 * (setMember), so a value can never reach a prototype. Callers measure the
 * value first (measure.ts), so recursion depth is bounded by --max-depth.
 */
export function cloneJson(v: Json): Json {
  // An IntegralFloat never changes: the copy shares it.
  if (typeof v !== "object" || v === null || v instanceof IntegralFloat) return v;
  if (Array.isArray(v)) {
    const out = new Array<Json>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = cloneJson(v[i] as Json);
    return out;
  }
  const out: JsonObject = {};
  for (const k in v) setMember(out, k, cloneJson(v[k] as Json));
  return out;
}
