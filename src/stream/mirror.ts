import { NO_LIMITS, applyNormalized, applyOp, hasMember, isObject, mark, newDoc, rollback, type ChangeOp, type Doc, type Json, type Mark, type Op, type OpError, type Undo } from "../core/index.js";

/**
 * The mirror of what the client holds (the state, or one activity's
 * content), as `fix` keeps it: the only place in src/stream that reaches into
 * the core's Doc or rolls one back, so that it can move behind a document
 * object of the core's (apply, transaction) without the pipeline changing.
 * Its places: newDoc (the constructor, reset, coreReading), mark and
 * rollback (begin, abort), applyNormalized (normalize), applyOp (coreReading).
 */

const NORMALIZE = { limits: NO_LIMITS, normalize: true, adopt: false } as const;

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
  private doc: Doc;
  /** The open transaction's undo log and marks, if one is open. */
  private open: { undo: Undo[]; before: Mark } | undefined;

  constructor(root: Json) {
    this.doc = newDoc(root);
  }

  /** What the client holds: an object, unless a STATE_SNAPSHOT carried something else (AG-UI allows any JSON there). */
  get root(): Json {
    return this.doc.root;
  }

  /** A STATE_SNAPSHOT or ACTIVITY_SNAPSHOT: the mirror is the value now. */
  reset(root: Json): void {
    this.doc = newDoc(root);
  }

  /** Opens a transaction: what normalize does until commit or abort can be undone as one. */
  begin(): void {
    this.open = { undo: [], before: mark(this.doc) };
  }

  commit(): void {
    this.open = undefined;
  }

  /** Undoes everything since begin: the mirror is as it was. */
  abort(): void {
    if (this.open) rollback(this.doc, this.open.undo, 0, this.open.before);
    this.open = undefined;
  }

  /** Normalizes the ops into the mirror, in order (protocol/README.md §5). */
  normalize(ops: readonly Indexed[], joinKeys: boolean): Normalized {
    const undo = this.open?.undo ?? [];
    const r: Normalized = { applied: [], ends: [], skips: [], joined: NO_JOINS };
    let joined: Set<number> | undefined;
    for (const { index, op } of ops) {
      let e = applyNormalized(this.doc, op, NORMALIZE, undo, r.applied);
      if (e?.code === "PATH_NOT_FOUND" && joinKeys) {
        const alt = joinedKey(this.doc.root, op);
        if (alt && !applyNormalized(this.doc, alt, NORMALIZE, undo, r.applied)) {
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
}

/** No op joined: shared, never written to (a Set made only when one is). */
const NO_JOINS: ReadonlySet<number> = new Set();

/**
 * The core's reading of one op against a copy of `before`: why it fails
 * (the failing step named), or undefined when the core would apply it.
 */
export function coreReading(before: Json, op: Op): OpError | undefined {
  // Through JSON, as fast-json-patch copies: the value is one the client printed, not necessarily a Doc of ours.
  return applyOp(newDoc(JSON.parse(JSON.stringify(before)) as Json), op, NO_LIMITS, []);
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
  for (; depth < path.length && isObject(cur) && hasMember(cur, path[depth] as string); depth++) cur = cur[path[depth] as string] as Json;
  if (!isObject(cur) || path.length - depth < 2) return undefined;
  const joined = [...path.slice(0, depth), path.slice(depth).join("/")];
  return { ...op, path: joined, pointer: undefined } as Op;
}
