import { jsonEqual } from "./equal.js";
import { fromEntries, hasMember, isObject, setMember, type Json, type JsonObject } from "./json.js";
import { measure } from "./measure.js";
import { toWireOp, type ChangeOp } from "./ops.js";
import { formatPointer, isForbiddenStep, type Path } from "./pointer.js";

/**
 * Per-member changes of a map (protocol/README.md §6 diffToolState): `add` for a member
 * that is new or moved (by JSON equality), `remove` for one in `remove` that
 * exists, nothing for the rest. An add on an object member creates or replaces
 * it, so it applies whether or not the client has the member.
 *
 * Order: by member name, in UTF-16 code-unit order (what `Array.prototype.sort`
 * does with strings), adds and removes interleaved. It depends only on the
 * names, not on the order members arrived in.
 */
export function diffMembers(old: JsonObject, set: JsonObject, remove: readonly string[], base: Path): ChangeOp[] {
  const names = new Set<string>();
  for (const k of Object.keys(set)) if (!hasMember(old, k) || !jsonEqual(old[k] as Json, set[k] as Json)) names.add(k);
  for (const k of remove) if (hasMember(old, k) && !hasMember(set, k)) names.add(k);
  const last = base[base.length - 1];
  if ([...names].some((k) => isForbiddenStep(last, k))) {
    // No op may name that member; the whole map goes instead, as one add.
    const next = fromEntries(Object.entries(old).filter(([k]) => !remove.includes(k) || hasMember(set, k)));
    for (const k of Object.keys(set)) setMember(next, k, set[k] as Json);
    return [{ op: "add", path: [...base], value: next }];
  }
  const ops: ChangeOp[] = [];
  for (const k of [...names].sort()) {
    ops.push(hasMember(set, k) ? { op: "add", path: [...base, k], value: set[k] as Json } : { op: "remove", path: [...base, k] });
  }
  return ops;
}

/** The namespace diff for a complete new map: members absent from `next` are removed. */
export function diffNamespace(old: JsonObject, next: JsonObject, base: Path): ChangeOp[] {
  return diffMembers(old, next, Object.keys(old), base);
}

/**
 * A delta that turns `a` into `b`, the value at `base`.
 * - Equal values give [].
 * - Arrays: the common prefix and suffix are trimmed, so inserting or removing
 *   at either end costs ops in proportion to the change, not to the length.
 * - Never larger in JSON bytes than one `replace` of `base` with `b`; each
 *   changed subtree falls back to one replace when that is smaller.
 * - At the root of two objects the fallback is per member, never a replace of
 *   the whole document: that would wipe members the client keeps for itself.
 */
export function diffValue(a: Json, b: Json, base: Path = []): ChangeOp[] {
  if (jsonEqual(a, b)) return [];
  const ops: ChangeOp[] = [];
  const path = [...base];
  if (path.length === 0 && isObject(a) && isObject(b)) {
    diffObjects(a, b, path, ops);
    return ops;
  }
  diffInto(a, b, path, ops);
  const single: ChangeOp = { op: "replace", path, value: b };
  // The exact guarantee, in serialized bytes, at the top; inner choices use estimates.
  // One op can cost more too: a remove whose member name is longer than the value left.
  if ((ops.length > 1 || ops[0]?.op !== "replace") && JSON.stringify(ops.map(toWireOp)).length > JSON.stringify([toWireOp(single)]).length) return [single];
  return ops;
}

/** Appends ops turning `a` into `b` (which differ) at `path`. */
function diffInto(a: Json, b: Json, path: string[], out: ChangeOp[]): void {
  if (isObject(a) && isObject(b)) diffObjects(a, b, path, out);
  else if (Array.isArray(a) && Array.isArray(b)) diffArrays(a, b, path, out);
  else out.push({ op: "replace", path: [...path], value: b });
}

function diffObjects(a: JsonObject, b: JsonObject, path: string[], out: ChangeOp[]): void {
  const last = path[path.length - 1];
  // A member no op may name that is added, removed or changed: replace the
  // object that holds it (the root too, if need be). One that stays the same needs no op.
  const moves = (k: string) => isForbiddenStep(last, k) && (!hasMember(a, k) || !hasMember(b, k) || !jsonEqual(a[k] as Json, b[k] as Json));
  if (Object.keys(a).some(moves) || Object.keys(b).some(moves)) {
    out.push({ op: "replace", path: [...path], value: b });
    return;
  }
  for (const k of Object.keys(a)) if (!hasMember(b, k)) out.push({ op: "remove", path: [...path, k] });
  for (const k of Object.keys(b)) {
    if (!hasMember(a, k)) out.push({ op: "add", path: [...path, k], value: b[k] as Json });
    else if (!jsonEqual(a[k] as Json, b[k] as Json)) child(a[k] as Json, b[k] as Json, [...path, k], out);
  }
}

function diffArrays(a: Json[], b: Json[], path: string[], out: ChangeOp[]): void {
  const min = Math.min(a.length, b.length);
  let pre = 0;
  while (pre < min && jsonEqual(a[pre] as Json, b[pre] as Json)) pre++;
  let suf = 0;
  while (suf < min - pre && jsonEqual(a[a.length - 1 - suf] as Json, b[b.length - 1 - suf] as Json)) suf++;
  const m1 = a.length - pre - suf;
  const m2 = b.length - pre - suf;
  const common = Math.min(m1, m2);
  for (let k = 0; k < common; k++) {
    const x = a[pre + k] as Json;
    const y = b[pre + k] as Json;
    if (!jsonEqual(x, y)) child(x, y, [...path, String(pre + k)], out);
  }
  // Highest index first, so each index still names the element it did in `a`.
  for (let k = m1 - 1; k >= common; k--) out.push({ op: "remove", path: [...path, String(pre + k)] });
  for (let k = common; k < m2; k++) out.push({ op: "add", path: [...path, String(pre + k)], value: b[pre + k] as Json });
}

/** Diffs a changed subtree, keeping one replace of it instead when that is smaller. */
function child(a: Json, b: Json, path: string[], out: ChangeOp[]): void {
  const start = out.length;
  diffInto(a, b, path, out);
  if (out.length - start <= 1) return;
  let cost = 0;
  for (let i = start; i < out.length; i++) cost += opBytes(out[i] as ChangeOp);
  const single: ChangeOp = { op: "replace", path, value: b };
  if (cost > opBytes(single)) {
    out.length = start;
    out.push(single);
  }
}

/** Estimated serialized size of an op: `{"op":"replace","path":"…","value":…}`. */
function opBytes(op: ChangeOp): number {
  const value = op.op === "add" || op.op === "replace" ? measure(op.value).bytes + 9 : 0;
  return 24 + formatPointer(op.path).length + value;
}
