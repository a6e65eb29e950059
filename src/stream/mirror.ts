import { JsonDocument, err, hasMember, isObject, ok, type ChangeOp, type Json, type Op, type OpError, type Writer } from "../core/index.js";

/**
 * The mirror of what the client holds (the state, or one activity's
 * content), as `fix` keeps it: a document of the core's (JsonDocument),
 * changed only by normalizing ops into it, one patch as one transaction.
 */

/** An op as decoded, with its position in the patch as sent. */
export interface Indexed {
  index: number;
  op: Op;
}

/** What normalizing a patch into the mirror did (protocol/README.md §5). */
export interface Normalized {
  /** The ops applied, in order, inserted ones included. */
  applied: ChangeOp[];
  /** For each op given, in order: the length of `applied` once it was applied, or -1 when it did not apply. */
  ends: number[];
  /** The ops that did not apply, with why. */
  skips: { index: number; error: OpError }[];
  /** The ops applied only with the rest of their path read as one key (--join-keys). */
  joined: ReadonlySet<number>;
}

export class Mirror {
  private doc: JsonDocument;

  constructor(root: Json) {
    this.doc = new JsonDocument(root);
  }

  /** What the client holds: an object, unless a STATE_SNAPSHOT carried something else (AG-UI allows any JSON there). */
  get root(): Json {
    return this.doc.root;
  }

  /** A STATE_SNAPSHOT or ACTIVITY_SNAPSHOT: the mirror is the value now. */
  reset(root: Json): void {
    this.doc = new JsonDocument(root);
  }

  /**
   * Normalizes the ops into the mirror, in order (protocol/README.md §5), as
   * one transaction: when `keep` says no to what it did, the mirror is as it
   * was before, and what it did is still returned (a delta that needs mending
   * is judged against the mirror as it was).
   */
  normalize(ops: readonly Indexed[], joinKeys: boolean, keep?: (r: Normalized) => boolean): Normalized {
    const out = this.doc.transaction((w) => {
      const r = apply(w, ops, joinKeys);
      return keep === undefined || keep(r) ? ok(r) : err(r);
    });
    return out.ok ? out.value : out.error;
  }

  /**
   * Applies again, as they are, the ops a normalize that `keep` rolled back
   * had applied. Not a second normalize: a rollback puts each removed member
   * back at the end of its object, and the rules that walk an object's
   * members (a move or copy onto the root, §5 rule 7) would then emit their
   * ops in another order, so what `fix --report` writes would differ from
   * what `fix` writes.
   */
  replay(applied: readonly ChangeOp[]): void {
    const out = this.doc.transaction((w) => {
      for (const op of applied) {
        const e = w.apply(op);
        if (e) return err(e);
      }
      return ok(undefined);
    }, { normalize: false });
    if (!out.ok) throw new Error(`ops that applied to the mirror did not apply again to the same state: ${out.error.message}`);
  }
}

function apply(w: Writer, ops: readonly Indexed[], joinKeys: boolean): Normalized {
  const r: Normalized = { applied: [], ends: [], skips: [], joined: NO_JOINS };
  let joined: Set<number> | undefined;
  for (const { index, op } of ops) {
    let e = w.apply(op, r.applied);
    if (e?.code === "PATH_NOT_FOUND" && joinKeys) {
      const alt = joinedKey(w.root, op);
      if (alt && !w.apply(alt, r.applied)) {
        e = undefined;
        (joined ??= new Set()).add(index);
      }
    }
    if (e) r.skips.push({ index, error: e });
    r.ends.push(e ? -1 : r.applied.length);
  }
  if (joined) r.joined = joined;
  return r;
}

/** No op joined: shared, never written to (a Set made only when one is). */
const NO_JOINS: ReadonlySet<number> = new Set();

/**
 * The core's reading of one op against a copy of `before`, by RFC 6902
 * alone: why it fails (the failing step named), or undefined when the core
 * would apply it.
 */
export function coreReading(before: Json, op: Op): OpError | undefined {
  // Through JSON, as fast-json-patch copies: the value is one the client printed, not necessarily one of ours.
  return new JsonDocument(JSON.parse(JSON.stringify(before)) as Json).apply(op, { normalize: false });
}

/**
 * --join-keys (protocol/README.md §13): a pointer that resolves to an
 * object up to a missing member, with more than one segment after it, read
 * with the rest of its segments joined by "/" as one member name. A server
 * that forgets RFC 6901's escaping (ag-ui #2242) sends
 * `/toolState/raster-ops/dataset` for the member `raster-ops/dataset`.
 */
function joinedKey(root: Json, op: Op): Op | undefined {
  const path = op.path;
  let cur = root;
  let depth = 0;
  for (let step = path[0]; step !== undefined && isObject(cur) && hasMember(cur, step); step = path[++depth]) cur = cur[step] ?? null;
  if (!isObject(cur) || path.length - depth < 2) return undefined;
  const joined = [...path.slice(0, depth), path.slice(depth).join("/")];
  return { ...op, path: joined, pointer: undefined };
}
