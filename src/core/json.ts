/** JSON values as they come out of `JSON.parse`. */
export type Json = null | boolean | number | string | Json[] | JsonObject;
export interface JsonObject {
  [key: string]: Json;
}

/** A result that is a value or an error, never a throw. */
export type Result<T, E> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const err = <E>(error: E): { ok: false; error: E } => ({ ok: false, error });

export function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
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
