import { applyOp, mark, rollback, type Doc, type Undo, type Writing } from "./apply.js";
import { diffValue } from "./diff.js";
import { jsonEqual } from "./equal.js";
import { opError, type OpError } from "./errors.js";
import { cloneJson, hasMember, isObject, type Json, type JsonObject } from "./json.js";
import { forbidden, isPrefix, locate, read, valueAt, walkTo } from "./locate.js";
import type { StateLimits } from "./measure.js";
import type { ChangeOp, Op } from "./ops.js";
import { parseIndex, type Path } from "./pointer.js";

/** How a patch is applied (protocol/README.md §5). */
export interface ApplyOptions {
  limits?: StateLimits;
  /** protocol/README.md §5 rules 2 and 3 (missing array before an append, replace that sets). Default true. */
  normalize?: boolean;
  /**
   * Take ownership of the ops' values instead of copying them into the
   * document. Only for callers that hand over values nothing else will read
   * or change afterwards, such as freshly parsed request params. Default false.
   */
  adopt?: boolean;
}

/**
 * ApplyOptions filled in, and whether an op that would leave the document as
 * it is is dropped (protocol/README.md §5 rule 8: neither applied nor sent).
 * `skipEqual` is only ever on with `normalize`: whole patches set it
 * (patch.ts); fix, which sends a delta that needs no mending as it came
 * (§13), and single ops do not.
 */
export interface Rules extends Required<ApplyOptions>, Writing {}

type AddOrReplace = Extract<ChangeOp, { value: Json }>;

/**
 * protocol/README.md §5 rule 2: `add X/-` where X is missing but X's container exists. Returns
 * the op that creates X as an empty array, or undefined when the rule does not apply.
 */
function missingArray(doc: Doc, op: AddOrReplace): ChangeOp | undefined {
  if (op.op !== "add" || op.path.length < 2 || op.path[op.path.length - 1] !== "-") return undefined;
  const x = op.path.slice(0, -1);
  if (locate(doc.root, x, false).ok) return undefined;
  const at = locate(doc.root, x, true);
  if (!at.ok) return undefined;
  // Only a member name or index == length creates X; an appended "-" would leave X/- unreachable.
  if (Array.isArray(at.value.parent) && x[x.length - 1] === "-") return undefined;
  return { op: "add", path: x, value: [] };
}

/** protocol/README.md §5 rule 3: `replace` of a missing member of an existing object becomes `add`. */
function replaceThatSets(doc: Doc, op: AddOrReplace): AddOrReplace {
  if (op.op !== "replace" || op.path.length === 0) return op;
  const parent = walkTo(doc.root, op.path, op.path.length - 1);
  if (!parent.ok || !isObject(parent.value) || hasMember(parent.value, op.path[op.path.length - 1] as string)) return op;
  return { op: "add", path: op.path, value: op.value };
}

/**
 * protocol/README.md §5 rule 6. RFC 6902 §4.4 evaluates a move's target after
 * the removal. fast-json-patch walks the target's intermediate steps before
 * it, so a target that passes through a later element of the array that
 * `from` is taken out of (whose indexes shift) can fail on the client while it
 * applies here.
 */
function shiftsTarget(from: Path, path: Path): boolean {
  const n = from.length;
  if (n === 0 || path.length <= n || !isPrefix(from.slice(0, -1), path)) return false;
  const a = parseIndex(from[n - 1] as string);
  const b = parseIndex(path[n - 1] as string);
  return typeof a === "number" && typeof b === "number" && b > a;
}

const samePath = (a: Path, b: Path): boolean => a.length === b.length && isPrefix(a, b);

/** Whether `path` names an element of an array (rather than a member, or the root). */
function inArray(root: Json, path: Path): boolean {
  if (path.length === 0) return false;
  const parent = walkTo(root, path, path.length - 1);
  return parent.ok && Array.isArray(parent.value);
}

const notObject = (what: string): OpError => opError("ROOT_NOT_OBJECT", `${what}: the root (a thread's state, an activity's content) must stay a JSON object (protocol/README.md §11)`);

/**
 * protocol/README.md §11 and §5 rule 7: the root is an object, and no emitted
 * op names it. python-json-patch refuses a `copy` from "" and patches nothing
 * once the root is a scalar; evanphx/json-patch refuses every op whose path is
 * "". So an op that names the root is re-expressed as member ops against the
 * document as it stands:
 * - `add`/`replace` of "" with an object, and a `move`/`copy` onto "", become
 *   the minimal diff from the old root to the new one (§6 diffState's rules);
 * - a `copy` from "" becomes an `add` of a copy of the root;
 * - a `copy` or `move` from "" onto "" changes nothing and is dropped.
 * Anything that would leave the root something other than an object is
 * refused with ROOT_NOT_OBJECT. Returns undefined for an op that names
 * neither the root nor a document whose root is not an object: the usual case.
 */
function rootRule(doc: Doc, op: Op, limits: StateLimits): ChangeOp[] | OpError | undefined {
  if (!isObject(doc.root)) return notObject(`${op.op} on a document whose root is not an object`);
  switch (op.op) {
    case "test":
      return undefined;
    case "remove":
      return op.path.length === 0 ? notObject("remove of the whole document") : undefined;
    case "add":
    case "replace":
      if (op.path.length > 0) return undefined;
      if (!isObject(op.value)) return notObject(`${op.op} of the root with a value that is not an object`);
      return rootDiff(doc.root, op.value);
    case "move":
    case "copy": {
      if (op.path.length > 0) {
        // A move out of the root is a move into its own child: applyOp refuses it.
        if (op.from.length > 0 || op.op === "move") return undefined;
        // A copy that would take the state past its limit is left to applyOp,
        // which refuses it before copying anything (the copy bomb, §7).
        if (2 * doc.bytes > limits.maxStateBytes) return undefined;
        return [{ op: "add", path: op.path, value: cloneJson(doc.root) }];
      }
      if (op.from.length === 0) return [];
      const src = valueAt(doc.root, op.from);
      // A from that cannot be read: applyOp reports why (FORBIDDEN_KEY, FROM_NOT_FOUND, ...).
      if (!src.ok) return undefined;
      if (!isObject(src.value)) return notObject(`${op.op} of a value that is not an object onto the root`);
      // A copy: the diff's values are taken from it, and applying the diff changes the tree it came from.
      return rootDiff(doc.root, cloneJson(src.value));
    }
  }
}

/**
 * The per-member ops that turn the root `from` into the object `to` (§5 rule
 * 7: no op names the root); FORBIDDEN_KEY when only an op on the root itself
 * could do it. Used by the normalizer and by diffState at the root.
 */
export function rootDiff(from: Json, to: Json): ChangeOp[] | OpError<"FORBIDDEN_KEY"> {
  const ops = diffValue(from, to);
  // Only a member no op may name (a root `__proto__` that changes) makes diffValue replace the root itself.
  if (ops.some((o) => o.path.length === 0)) return opError("FORBIDDEN_KEY", "a root member named __proto__ would change, and no op can name it");
  return ops;
}

/**
 * protocol/README.md §5 rule 8 for a `move` or a `copy`: whether it, applied
 * to the document as it stands, would leave it exactly as it is, so that it is
 * neither applied nor sent (RFC 6902 asks of an op only that its
 * post-condition hold, and here it already does). True for:
 * - a `copy` onto an object member that holds a value equal (§3) to `from`'s
 *   (onto an array element it inserts, RFC 6902 §4.5);
 * - a `move` within one array across elements all equal to the one moved
 *   (RFC 6902 §4.4: removed, then put back where an equal one stood).
 * The rule for `replace` and `add` (a value equal to the one there) is the
 * engine's (apply.ts, Writing.skipEqual), on the slot the op's own walk finds.
 * An op that names the root is left to rootRule, whose diff of equal roots is
 * empty; a self-move, to applyNormalized. An op that fails a check that comes
 * before the state (§4: a forbidden key, a path deeper than the limit) is not
 * silent: it is reported as before.
 */
function leavesAsIs(doc: Doc, op: Extract<Op, { from: Path }>, limits: StateLimits): boolean {
  if (op.path.length === 0 || op.path.length > limits.maxDepth || !isObject(doc.root) || forbidden(op.path)) return false;
  return copiesOrMovesAsIs(doc.root, op);
}

/**
 * The value a non-root path names and its container, when it exists; never
 * builds an error, since most ops this asks about write a new member or
 * append, and are not silent.
 */
function existing(root: Json, path: Path): { parent: Json[] | JsonObject; value: Json } | undefined {
  const last = path[path.length - 1] as string;
  const parent = walkTo(root, path, path.length - 1);
  if (!parent.ok) return undefined;
  const p = parent.value;
  if (Array.isArray(p)) {
    const i = parseIndex(last);
    return typeof i === "number" && i < p.length ? { parent: p, value: p[i] as Json } : undefined;
  }
  return isObject(p) && hasMember(p, last) ? { parent: p, value: p[last] as Json } : undefined;
}

function copiesOrMovesAsIs(root: Json, op: Extract<Op, { from: Path }>): boolean {
  if (op.from.length === 0 || forbidden(op.from)) return false;
  if (op.op === "copy") {
    const at = existing(root, op.path);
    if (at === undefined || Array.isArray(at.parent)) return false;
    const src = existing(root, op.from);
    return src !== undefined && jsonEqual(at.value, src.value);
  }
  // A move within one array, from index i to index j (counted after the removal).
  const n = op.path.length;
  if (op.from.length !== n || !isPrefix(op.from.slice(0, -1), op.path)) return false;
  const src = existing(root, op.from);
  if (src === undefined || !Array.isArray(src.parent)) return false;
  const arr = src.parent;
  const i = parseIndex(op.from[n - 1] as string) as number;
  const t = parseIndex(op.path[n - 1] as string);
  const j = t === "-" ? arr.length - 1 : t;
  if (j === undefined || j >= arr.length) return false;
  for (let k = Math.min(i, j); k <= Math.max(i, j); k++) if (!jsonEqual(arr[k] as Json, src.value)) return false;
  return true;
}

/** Applies generated ops all or nothing, appending them to `applied`. */
function applyAll(doc: Doc, ops: readonly ChangeOp[], opts: Rules, undo: Undo[], applied: ChangeOp[]): OpError | undefined {
  const start = undo.length;
  const before = mark(doc);
  for (const o of ops) {
    const e = applyOp(doc, o, opts.limits, undo);
    if (e) {
      rollback(doc, undo, start, before);
      return e;
    }
  }
  applied.push(...ops);
  return undefined;
}

/**
 * Applies one op with the rules of protocol/README.md §5 (rules 2 and 3 only
 * when `opts.normalize`, rule 8 only when `opts.skipEqual`). Appends what was
 * applied to `applied`: inserted ops included, `test` ops, moves onto
 * themselves and ops that left the document as it was left out.
 */
export function applyNormalized(doc: Doc, op: Op, opts: Rules, undo: Undo[], applied: ChangeOp[]): OpError | undefined {
  if (opts.skipEqual && (op.op === "move" || op.op === "copy") && leavesAsIs(doc, op, opts.limits)) return undefined;
  if (opts.normalize) {
    const root = rootRule(doc, op, opts.limits);
    if (root !== undefined) return Array.isArray(root) ? applyAll(doc, root, opts, undo, applied) : root;
  }
  if (opts.normalize && (op.op === "add" || op.op === "replace")) {
    // Rules 2 and 3 only change an op that fails for want of its place
    // (PATH_NOT_FOUND), and a failed op changes nothing: so the op is tried
    // as given first, and the usual one walks its path once, not twice.
    const logged = undo.length;
    const tried = applyOp(doc, op, opts.limits, undo, opts);
    if (!tried) {
      // A write logs its undo; none means the value was already there (opts.skipEqual) and nothing is sent.
      if (undo.length > logged) applied.push(op);
      return undefined;
    }
    if (tried.code !== "PATH_NOT_FOUND") return tried;
    const create = missingArray(doc, op);
    if (create) {
      const start = undo.length;
      const before = mark(doc);
      const e = applyOp(doc, create, opts.limits, undo) ?? applyOp(doc, op, opts.limits, undo, opts);
      if (e) {
        rollback(doc, undo, start, before);
        return e;
      }
      applied.push(create, op);
      return undefined;
    }
    const sets = replaceThatSets(doc, op);
    if (sets === op) return tried;
    const e = applyOp(doc, sets, opts.limits, undo, opts);
    if (!e) applied.push(sets);
    return e;
  }
  if (op.op === "move" && shiftsTarget(op.from, op.path)) {
    const src = locate(doc.root, op.from, false);
    const moved = src.ok ? read(doc.root, src.value) : null;
    const e = applyOp(doc, op, opts.limits, undo, opts);
    // Sent as remove + add: both libraries evaluate those the same way.
    if (!e) applied.push({ op: "remove", path: op.from }, { op: "add", path: op.path, value: cloneJson(moved) });
    return e;
  }
  // A move onto itself changes nothing here, but fast-json-patch would move
  // the member to the end (§5 rule 6). A copy onto an object member itself
  // changes nothing either (§5 rule 7); onto an array element it inserts a
  // second copy (RFC 6902 §4.5 is an add, and an add into an array inserts).
  const onItself = (op.op === "move" || op.op === "copy") && samePath(op.from, op.path) && (op.op === "move" || !inArray(doc.root, op.path));
  const e = applyOp(doc, op, opts.limits, undo, opts);
  // Tests are checked, not replayed (protocol/README.md §3).
  if (e || op.op === "test") return e;
  if (!onItself) applied.push(op);
  return undefined;
}
