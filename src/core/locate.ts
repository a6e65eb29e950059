import { opError, type OpError } from "./errors.js";
import { hasMember, isObject, type Json, type JsonObject } from "./json.js";
import { ELEMENT_OVERHEAD, memberOverhead } from "./measure.js";
import { clip, formatPointer, isForbiddenStep, parseIndex, type Path } from "./pointer.js";
import { err, ok, type Result } from "./result.js";

/** RFC 6901 lookups over parsed paths: where a path leads, and whether it may lead there. */

/** What a lookup can meet along a path. */
export type LookupCode = "INVALID_INDEX" | "PATH_NOT_FOUND" | "INDEX_OUT_OF_BOUNDS";

export type Container = Json[] | JsonObject;

export const where = (path: Path, upto: number): string => clip(formatPointer(path.slice(0, upto)));

/** The value a step could not go into, by name: the root's pointer is "", which a message would show as nothing. */
const notContainer = (path: Path, upto: number): string => `${upto === 0 ? "the root" : where(path, upto)} is not a container`;

/** The FORBIDDEN_KEY error for a path that goes through a key no op may name (protocol/README.md §3), if it does. */
export function forbidden(path: Path): OpError<"FORBIDDEN_KEY"> | undefined {
  // path[-1] would be a property lookup off the array's fast path: the first step has no previous one.
  for (let i = 0; i < path.length; i++) {
    if (isForbiddenStep(i === 0 ? undefined : path[i - 1], path[i] as string)) {
      return opError("FORBIDDEN_KEY", `${where(path, i + 1)} goes through a forbidden key`);
    }
  }
  return undefined;
}

/** The value at path[0..upto). Every step must exist; "-" names no element here. */
export function walkTo(root: Json, path: Path, upto: number): Result<Json, OpError<"INVALID_INDEX" | "PATH_NOT_FOUND">> {
  let cur = root;
  for (let i = 0; i < upto; i++) {
    const token = path[i] as string;
    if (Array.isArray(cur)) {
      const idx = parseIndex(token);
      if (idx === undefined || idx === "-") {
        return err(opError("INVALID_INDEX", `${where(path, i + 1)}: ${JSON.stringify(clip(token))} is not an array index`));
      }
      if (idx >= cur.length) return err(opError("PATH_NOT_FOUND", `${where(path, i + 1)} does not exist`));
      cur = cur[idx] as Json;
    } else if (isObject(cur)) {
      if (!hasMember(cur, token)) return err(opError("PATH_NOT_FOUND", `${where(path, i + 1)} does not exist`));
      cur = cur[token] as Json;
    } else {
      return err(opError("PATH_NOT_FOUND", `${where(path, i + 1)} does not exist: ${notContainer(path, i)}`));
    }
  }
  return ok(cur);
}

export interface Slot {
  parent: Container | undefined; // undefined: the root
  /** Member name, or array index ("-" resolved to the length for add). */
  key: string | number;
  /** Present when the slot holds a value. */
  exists: boolean;
}

/**
 * Locates the slot a path names. `forAdd` allows "-" and index == length
 * (RFC 6902 §4.1); otherwise the slot must exist.
 */
export function locate(root: Json, path: Path, forAdd: boolean): Result<Slot, OpError<LookupCode>> {
  if (path.length === 0) return ok({ parent: undefined, key: "", exists: true });
  const p = walkTo(root, path, path.length - 1);
  if (!p.ok) return p;
  const parent = p.value;
  const token = path[path.length - 1] as string;
  if (Array.isArray(parent)) {
    const idx = parseIndex(token);
    if (idx === undefined || (idx === "-" && !forAdd)) {
      const why = idx === "-" ? '"-" names no element here' : `${JSON.stringify(clip(token))} is not an array index`;
      return err(opError("INVALID_INDEX", `${where(path, path.length)}: ${why}`));
    }
    const i = idx === "-" ? parent.length : idx;
    if (forAdd ? i > parent.length : i >= parent.length) {
      return err(opError("INDEX_OUT_OF_BOUNDS", `${where(path, path.length)}: index ${i} is past the end (length ${parent.length})`));
    }
    return ok({ parent, key: i, exists: !forAdd });
  }
  if (isObject(parent)) {
    const exists = hasMember(parent, token);
    if (!exists && !forAdd) return err(opError("PATH_NOT_FOUND", `${where(path, path.length)} does not exist`));
    return ok({ parent, key: token, exists });
  }
  return err(opError("PATH_NOT_FOUND", `${where(path, path.length)} does not exist: ${notContainer(path, path.length - 1)}`));
}

export function read(root: Json, slot: Slot): Json {
  if (slot.parent === undefined) return root;
  return (slot.parent as Record<string | number, Json>)[slot.key] as Json;
}

/** Bytes the slot's container spends on the member itself, beside its value. */
export const overhead = (slot: Slot): number => (slot.parent === undefined ? 0 : typeof slot.key === "number" ? ELEMENT_OVERHEAD : memberOverhead(slot.key));

/**
 * Reads the value at a path: an own member or an element that exists. The
 * value is the document's own, not a copy.
 */
export function valueAt(root: Json, path: Path): Result<Json, OpError<LookupCode | "FORBIDDEN_KEY">> {
  const bad = forbidden(path);
  if (bad) return err(bad);
  const at = locate(root, path, false);
  return at.ok ? ok(read(root, at.value)) : at;
}

export function isPrefix(a: Path, b: Path): boolean {
  if (a.length > b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
