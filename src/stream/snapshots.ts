import { diffNamespace, diffValue, formatPointer, hasMember, isObject, jsonEqual, rootDiff, valueAt, type ChangeOp, type Json, type Path } from "../core/index.js";

/**
 * What a STATE_SNAPSHOT costs the client, and the repair policy's deltas in
 * its place (protocol/README.md §13). Pure functions over the mirror as it
 * stands and the snapshot as sent.
 */

/** What a snapshot does to a root member, against what the client holds. */
export type Change = "removes" | "replaces" | "adds";

/** A member of the root that a snapshot would change. */
export interface Wipe {
  name: string;
  pointer: string;
  change: Change;
}

/**
 * The root members the client holds, among `members`, that `snapshot` would
 * remove or replace (by JSON equality), in the client's order. `own` (`check
 * --own`, §13): what stands at an owned member is the server's, so a member
 * is wiped only when the snapshot drops or changes some of it outside them;
 * an owned root member never is.
 */
export function wipes(held: Json, snapshot: Json, members: (name: string) => boolean, own: readonly Path[] = []): Wipe[] {
  if (!isObject(held)) return [];
  const out: Wipe[] = [];
  const next = isObject(snapshot) ? snapshot : undefined;
  for (const name of Object.keys(held)) {
    if (!members(name)) continue;
    const inside = own.length === 0 ? own : own.filter((p) => p[0] === name).map((p) => p.slice(1));
    const had = held[name] as Json;
    if (next === undefined || !hasMember(next, name)) {
      if (inside.length === 0 || !equalOutside(had, isObject(had) ? {} : undefined, inside)) out.push({ name, pointer: formatPointer([name]), change: "removes" });
    } else if (inside.length === 0 ? !jsonEqual(had, next[name] as Json) : !equalOutside(had, next[name] as Json, inside)) out.push({ name, pointer: formatPointer([name]), change: "replaces" });
  }
  return out;
}

/**
 * JSON equality of `a` and `b` everywhere but at the paths in `skip` (relative to them), whose values
 * are the server's: an empty path skips the whole value. Where one side has an object and the other
 * nothing, the missing side reads as {}: a member that held only owned values loses nothing of the
 * client's when it goes.
 */
function equalOutside(a: Json | undefined, b: Json | undefined, skip: readonly Path[]): boolean {
  if (skip.some((p) => p.length === 0)) return true;
  if (skip.length === 0) return a === undefined || b === undefined ? a === b : jsonEqual(a, b);
  const x = a === undefined && isObject(b) ? {} : a;
  const y = b === undefined && isObject(a) ? {} : b;
  const bothObjects = isObject(x) && isObject(y);
  if (!bothObjects && !(Array.isArray(x) && Array.isArray(y))) return x === undefined || y === undefined ? x === y : jsonEqual(x, y);
  const xs = x as Record<string, Json>;
  const ys = y as Record<string, Json>;
  if (!bothObjects && (xs as unknown as Json[]).length !== (ys as unknown as Json[]).length) return false;
  const keys = new Set([...Object.keys(xs), ...Object.keys(ys)]);
  for (const k of keys) {
    const under = skip.filter((p) => String(p[0]) === k).map((p) => p.slice(1));
    if (!equalOutside(hasMember(xs, k) ? xs[k] : undefined, hasMember(ys, k) ? ys[k] : undefined, under)) return false;
  }
  return true;
}

/**
 * `--own` (§13): the root members outside the owned ones where `snapshot`
 * differs from what the client holds, which fix does not apply: those it
 * removes or replaces, in the client's order, then those it sets and the
 * client does not hold, in the snapshot's.
 */
export function unowned(held: Json, snapshot: Json, own: readonly Path[]): Wipe[] {
  const out = wipes(held, snapshot, (name) => !ownedRoot(own, name));
  if (!isObject(snapshot)) return out;
  const has = isObject(held) ? held : undefined;
  for (const name of Object.keys(snapshot)) {
    if (!ownedRoot(own, name) && (has === undefined || !hasMember(has, name))) out.push({ name, pointer: formatPointer([name]), change: "adds" });
  }
  return out;
}

/**
 * `--own` (§13): the ops that make the owned members of `held` what
 * `snapshot` says, in the seed server's shape. At a run's first owned write
 * (`resync`), one `add` of each owned member, whole: an add of a member
 * creates or replaces it, so it applies whatever the client held, and the
 * client is back in step however it had drifted. After that, per member, the
 * ops diffToolState (an object: one add or remove per key that moved) or
 * diffState (any other value) would send; nothing when nothing moved. An
 * owned member the snapshot leaves out is removed. Missing parents of a
 * nested owned member are added as objects first.
 */
export function ownedOps(held: Json, snapshot: Json, own: readonly Path[], resync: boolean): ChangeOp[] {
  const ops: ChangeOp[] = [];
  for (const path of own) {
    const next = valueAt(snapshot, path);
    const old = valueAt(held, path);
    if (!next.ok) {
      if (old.ok) ops.push({ op: "remove", path });
      continue;
    }
    if (resync || !old.ok) {
      if (!parents(held, path, ops)) continue;
      ops.push({ op: "add", path, value: next.value });
    } else if (isObject(old.value) && isObject(next.value)) ops.push(...diffNamespace(old.value, next.value, path));
    else ops.push(...diffValue(old.value, next.value, path));
  }
  return ops;
}

/** Adds the missing objects on the way to `path`; false when a value that is not an object stands in the way. */
function parents(held: Json, path: Path, ops: ChangeOp[]): boolean {
  for (let n = 1; n < path.length; n++) {
    const at = valueAt(held, path.slice(0, n));
    if (at.ok) {
      if (!isObject(at.value)) return false;
      continue;
    }
    ops.push({ op: "add", path: path.slice(0, n), value: {} });
    for (let m = n + 1; m < path.length; m++) ops.push({ op: "add", path: path.slice(0, m), value: {} });
    return true;
  }
  return true;
}

/** Whether a root member holds, or is, an owned member: the rest of the root is the client's. */
export const ownedRoot = (own: readonly Path[], name: string): boolean => own.some((p) => p.length === 0 || p[0] === name);

/**
 * `--snapshots delta` (§13): the minimal delta from what the client holds to
 * the snapshot (diffState's rules at the root: members the snapshot leaves
 * out are removed), or undefined when no delta can say it (a root that is
 * not an object, or a root member no op may name): then the snapshot goes as sent.
 */
export function snapshotDelta(held: Json, snapshot: Json): ChangeOp[] | undefined {
  if (!isObject(held) || !isObject(snapshot)) return undefined;
  const ops = rootDiff(held, snapshot);
  return Array.isArray(ops) ? ops : undefined;
}
