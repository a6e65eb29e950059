import { JsonDocument, err, hasMember, isObject, ok, type ChangeOp, type Json, type Op, type OpError, type Result, type Writer } from "../core/index.js";

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
  /** The ops that did not apply, with why. */
  skips: { index: number; error: OpError }[];
  /** The ops applied only with the rest of their path read as one key (--join-keys). */
  joined: ReadonlySet<number>;
  /** Whether normalizing changed nothing: every op as sent applied as itself (a `test` checked), and none was left out. */
  asSent: boolean;
  /**
   * The ops that applied, but not as themselves: rewritten (`mended`: an
   * array inserted, a replace made an add, a key joined, §5 rules 6 and 7) or
   * applied without a trace in the delta (`discarded`: a test, a move or
   * copy onto itself, §5 rules 6 to 8). Made only when there is one: a delta
   * sent as it came costs no array.
   */
  changed: readonly Changed[];
}

/** An op that applied, but is not sent as itself (Normalized.changed). */
export interface Changed {
  index: number;
  outcome: "mended" | "discarded";
}

/** How a patch is normalized into the mirror. */
export interface NormalizeOptions {
  /** Read an unescaped key's segments as one member name (--join-keys). */
  readonly joinKeys: boolean;
  /**
   * `all`: what normalizing did stands. `as-sent`: it stands only when the
   * patch applied as sent; otherwise the mirror is as it was before, so a
   * delta that needs mending can be judged against the mirror as it was.
   */
  readonly keep: "all" | "as-sent";
}

export class Mirror {
  private doc: JsonDocument;
  /**
   * The arguments of the normalize under way, read by `body`: fix opens a
   * transaction for every delta, and one body made with the mirror spares a
   * closure per delta.
   */
  private ops: readonly Indexed[] = NO_OPS;
  private sent = 0;
  private opts: NormalizeOptions = { joinKeys: false, keep: "all" };
  private readonly body = (w: Writer): Result<Normalized, Normalized> => {
    const r = apply(w, this.ops, this.sent, this.opts.joinKeys);
    return this.opts.keep === "all" || r.asSent ? ok(r) : err(r);
  };

  constructor(root: Json) {
    this.doc = new JsonDocument(root);
  }

  /** What the client holds: an object, unless a STATE_SNAPSHOT carried something else (AG-UI allows any JSON there). */
  get root(): Json {
    return this.doc.root;
  }

  /** Its approximate JSON size, as a thread's state is counted (stats.stateBytes). */
  get bytes(): number {
    return this.doc.bytes;
  }

  /** A STATE_SNAPSHOT or ACTIVITY_SNAPSHOT: the mirror is the value now. */
  reset(root: Json): void {
    this.doc = new JsonDocument(root);
  }

  /**
   * Normalizes the ops into the mirror, in order (protocol/README.md §5), as
   * one transaction, kept or rolled back as `opts.keep` says; what it did is
   * returned either way. `sent` is the number of ops in the patch as sent,
   * those the schema stage let through (`ops`) and the others.
   */
  normalize(ops: readonly Indexed[], sent: number, opts: NormalizeOptions): Normalized {
    this.ops = ops;
    this.sent = sent;
    this.opts = opts;
    try {
      const out = this.doc.transaction(this.body);
      return out.ok ? out.value : out.error;
    } finally {
      // The mirror holds no patch beyond its own normalize.
      this.ops = NO_OPS;
    }
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

function apply(w: Writer, ops: readonly Indexed[], sent: number, joinKeys: boolean): Normalized {
  const r: Normalized = { applied: [], skips: [], joined: NO_JOINS, asSent: false, changed: NO_CHANGES };
  let joined: Set<number> | undefined;
  let changed: Changed[] | undefined;
  let rewritten = false;
  for (const { index, op } of ops) {
    const start = r.applied.length;
    let e = w.apply(op, r.applied);
    if (e?.code === "PATH_NOT_FOUND" && joinKeys) {
      const alt = joinedKey(w.root, op);
      if (alt && !w.apply(alt, r.applied)) {
        e = undefined;
        (joined ??= new Set()).add(index);
      }
    }
    if (e) r.skips.push({ index, error: e });
    else if (r.applied.length !== start + 1 || r.applied[start] !== op || joined?.has(index) || dashReplace(op)) {
      (changed ??= []).push({ index, outcome: r.applied.length === start ? "discarded" : "mended" });
      // A test that holds changes nothing, and holds on the client too, which holds the mirror: the delta can still go as it came.
      if (op.op !== "test") rewritten = true;
    }
  }
  if (joined) r.joined = joined;
  if (changed) r.changed = changed;
  // Normalizing changed nothing: every op as sent applied as itself (a test checked), and none was left out.
  r.asSent = ops.length === sent && r.skips.length === 0 && !rewritten;
  return r;
}

/** protocol/README.md §5 rule 7: a replace whose last token is "-" goes as an add (the core applies it as itself; toWireOp writes the add). */
const dashReplace = (op: Op): boolean => op.op === "replace" && op.path[op.path.length - 1] === "-";

const NO_OPS: readonly Indexed[] = Object.freeze([]);

/** No op changed: shared, never written to. */
const NO_CHANGES: readonly Changed[] = Object.freeze([]);

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
