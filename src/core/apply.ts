import { jsonEqual } from "./equal.js";
import { limitError, opError, type OpError } from "./errors.js";
import { cloneJson, setMember, type Json } from "./json.js";
import { forbidden, isPrefix, locate, overhead, read, where, type Container, type Slot } from "./locate.js";
import { measure, type StateLimits } from "./measure.js";
import type { Op } from "./ops.js";
import { clip, formatPointer, type Path } from "./pointer.js";
import { err, ok, type Result } from "./result.js";

/**
 * The RFC 6902 engine: one op, applied strictly and in place, with an undo
 * log. The protocol's own rules (protocol/README.md §5) are in normalize.ts,
 * and whole patches in patch.ts.
 */

/** A document being patched in place, with its approximate JSON size kept current. */
export interface Doc {
  root: Json;
  bytes: number;
  /**
   * An upper bound on the nesting of containers in the document, kept so a
   * move need not walk the value it moves to know it stays within maxDepth.
   * Moves to deeper paths can loosen it; it is made exact again (one walk of
   * the document) only when a loose bound would refuse a move.
   */
  depth: number;
  /** Whether `depth` may be above the document's real nesting. */
  loose: boolean;
}

export const NO_LIMITS: StateLimits = { maxDepth: Infinity, maxStateBytes: Infinity };

/** Restores one mutation. Kept in a log so atomic calls and multi-step ops can roll back. */
export type Undo = () => void;

/** How applyOp writes the value of an `add` or a `replace`. */
export interface Writing {
  /** Keep the op's own value instead of a copy (ApplyOptions.adopt). */
  adopt: boolean;
  /**
   * Leave a slot that already holds a value equal (§3) to the op's as it is,
   * logging no undo (protocol/README.md §5 rule 8, normalize.ts). Decided
   * here, on the slot the op's one walk found, rather than by a walk of its own.
   */
  skipEqual: boolean;
}

const COPYING: Writing = { adopt: false, skipEqual: false };

export function newDoc(root: Json): Doc {
  const m = measure(root);
  return { root, bytes: m.bytes, depth: m.depth, loose: false };
}

// ---------------------------------------------------------------- mutations

/**
 * Puts an owned value in a slot, logging the undo: an existing slot (the root,
 * a member, or an element being replaced) is overwritten in place, keeping
 * member order; a new one is inserted (array) or defined (object).
 */
function attach(doc: Doc, slot: Slot, value: Json, undo: Undo[]): void {
  const { parent, key } = slot;
  if (parent === undefined) {
    const old = doc.root;
    doc.root = value;
    undo.push(() => (doc.root = old));
  } else if (slot.exists) {
    // An own data property is found before any inherited setter, so this stays plain data.
    const p = parent as Record<string | number, Json>;
    const old = p[key] as Json;
    p[key] = value;
    undo.push(() => (p[key] = old));
  } else if (Array.isArray(parent)) {
    const i = key as number;
    parent.splice(i, 0, value);
    undo.push(() => parent.splice(i, 1));
  } else {
    const k = key as string;
    setMember(parent, k, value);
    undo.push(() => delete parent[k]);
  }
}

/** Takes the value out of an existing, non-root slot, logging the undo. */
function detach(slot: Slot, undo: Undo[]): Json {
  const parent = slot.parent as Container;
  if (Array.isArray(parent)) {
    const i = slot.key as number;
    const [old] = parent.splice(i, 1);
    undo.push(() => parent.splice(i, 0, old as Json));
    return old as Json;
  }
  const k = slot.key as string;
  const old = parent[k] as Json;
  delete parent[k];
  undo.push(() => setMember(parent, k, old));
  return old;
}

/** Bytes of what a write to this slot would overwrite. */
function replacedBytes(doc: Doc, slot: Slot): number {
  return slot.exists ? measure(read(doc.root, slot)).bytes + overhead(slot) : 0;
}

/**
 * Checks the limits for writing `value` at `path`, before any memory is spent:
 * the walk stops as soon as a limit is passed (the copy bomb, a 5,000-deep value).
 */
/** What a write will do to the document: the bytes it adds and the nesting it reaches. */
interface Room {
  delta: number;
  depth: number;
}

function admit(doc: Doc, path: Path, slot: Slot, value: Json, limits: StateLimits): Result<Room, OpError> {
  const replaced = replacedBytes(doc, slot);
  const m = measure(value, limits.maxDepth - path.length, limits.maxStateBytes - doc.bytes + replaced);
  if (path.length + m.depth > limits.maxDepth) {
    return err(limitError("maxDepth", limits.maxDepth, path.length + m.depth, `${where(path, path.length)}: the value would nest too deep`));
  }
  const grows = m.bytes + overhead(slot) - replaced;
  if (doc.bytes + grows > limits.maxStateBytes) {
    return err(limitError("maxStateBytes", limits.maxStateBytes, doc.bytes + grows, `${where(path, path.length)}: the state would grow too large`));
  }
  return ok({ delta: grows, depth: path.length + m.depth });
}

/** Records what a write did to the nesting bound; `replaced` says it overwrote a value, which may have been deeper. */
function deepen(doc: Doc, path: Path, depth: number, replaced: boolean): void {
  if (replaced) doc.loose = true;
  if (path.length === 0) {
    doc.depth = depth;
    doc.loose = false;
  } else if (depth > doc.depth) doc.depth = depth;
}

// ---------------------------------------------------------------- one op

/**
 * Applies one op in place. On failure nothing has changed and the error is
 * returned; on success the undo log holds what reverses it.
 */
export function applyOp(doc: Doc, op: Op, limits: StateLimits, undo: Undo[], writing: Writing = COPYING): OpError | undefined {
  const bad = forbidden(op.path) ?? (op.op === "move" || op.op === "copy" ? forbidden(op.from) : undefined);
  if (bad) return bad;
  if (op.path.length > limits.maxDepth) {
    return limitError("maxDepth", limits.maxDepth, op.path.length, "the pointer is too deep");
  }
  switch (op.op) {
    case "add":
    case "replace": {
      const at = locate(doc.root, op.path, op.op === "add");
      if (!at.ok) return at.error;
      // An add into an array inserts (its slot does not exist yet), so only a member or an element being replaced can already hold the value.
      if (writing.skipEqual && at.value.exists && op.path.length > 0 && jsonEqual(read(doc.root, at.value), op.value)) return undefined;
      const room = admit(doc, op.path, at.value, op.value, limits);
      if (!room.ok) return room.error;
      // protocol/README.md §5 rule 5: the mirror never aliases a request (unless the caller hands the value over).
      attach(doc, at.value, writing.adopt ? op.value : cloneJson(op.value), undo);
      doc.bytes += room.value.delta;
      deepen(doc, op.path, room.value.depth, at.value.exists);
      return undefined;
    }
    case "remove": {
      // RFC 6902 leaves removing the whole document undefined; strict implementations refuse it.
      if (op.path.length === 0) return opError("INVALID_OP", "remove of the whole document is not allowed");
      const at = locate(doc.root, op.path, false);
      if (!at.ok) return at.error;
      const size = measure(read(doc.root, at.value)).bytes + overhead(at.value);
      detach(at.value, undo);
      doc.bytes -= size;
      doc.loose = true;
      return undefined;
    }
    case "test": {
      const at = locate(doc.root, op.path, false);
      if (!at.ok) return at.error;
      return jsonEqual(read(doc.root, at.value), op.value) ? undefined : opError("TEST_FAILED", `${clip(formatPointer(op.path))} does not equal the tested value`);
    }
    case "copy":
    case "move":
      return op.op === "copy" ? copy(doc, op.from, op.path, limits, undo) : move(doc, op.from, op.path, limits, undo);
  }
}

function fromError(e: OpError): OpError {
  // The from location is read, never created: its absence is FROM_NOT_FOUND.
  return e.code === "PATH_NOT_FOUND" || e.code === "INDEX_OUT_OF_BOUNDS" ? opError("FROM_NOT_FOUND", `from: ${e.message}`) : { ...e, message: `from: ${e.message}` };
}

function copy(doc: Doc, from: Path, path: Path, limits: StateLimits, undo: Undo[]): OpError | undefined {
  const src = locate(doc.root, from, false);
  if (!src.ok) return fromError(src.error);
  const at = locate(doc.root, path, true);
  if (!at.ok) return at.error;
  const value = read(doc.root, src.value);
  // Measured against the room left before it is cloned: a doubling copy is refused up front.
  const room = admit(doc, path, at.value, value, limits);
  if (!room.ok) return room.error;
  attach(doc, at.value, cloneJson(value), undo);
  doc.bytes += room.value.delta;
  deepen(doc, path, room.value.depth, at.value.exists);
  return undefined;
}

function move(doc: Doc, from: Path, path: Path, limits: StateLimits, undo: Undo[]): OpError | undefined {
  const src = locate(doc.root, from, false);
  if (!src.ok) return fromError(src.error);
  if (from.length < path.length && isPrefix(from, path)) {
    // Quoted: the root's pointer is the empty string, which unquoted read as a gap in the sentence.
    return opError("MOVE_INTO_ITSELF", `cannot move ${JSON.stringify(clip(formatPointer(from)))} into its own child ${JSON.stringify(clip(formatPointer(path)))}`);
  }
  if (from.length === path.length && isPrefix(from, path)) {
    // Moving a value onto itself changes nothing (RFC 6902 §4.4 is remove then add at the same place).
    return undefined;
  }
  if (from.length === 0) return opError("MOVE_INTO_ITSELF", "cannot move the whole document");
  const value = read(doc.root, src.value);
  // Removing an object member shifts nothing, so the target can be checked
  // first and a refused move never has to put the member back (which would
  // change member order). Array elements are put back in place by splice.
  if (!Array.isArray(src.value.parent)) {
    const target = locate(doc.root, path, true);
    if (!target.ok) return target.error;
  }
  // Only a move to a deeper path can deepen the state. The value nests at
  // most doc.depth - from.length deep; only when that bound is not enough is
  // it made exact, first for the document, then for the value. Walking the
  // value on every move would let one small request of many moves of a large
  // value keep the sidecar busy for minutes.
  let depth = 0;
  if (path.length > from.length) {
    if (doc.loose && path.length + doc.depth - from.length > limits.maxDepth) {
      doc.depth = measure(doc.root).depth;
      doc.loose = false;
    }
    depth = path.length + doc.depth - from.length;
    if (depth > limits.maxDepth) {
      depth = path.length + measure(value, limits.maxDepth - path.length).depth;
      if (depth > limits.maxDepth) return limitError("maxDepth", limits.maxDepth, depth, `${where(path, path.length)}: the value would nest too deep`);
    }
  }
  // RFC 6902 §4.4: remove from "from", then add at "path", evaluated after the removal.
  const start = undo.length;
  const before = mark(doc);
  detach(src.value, undo);
  doc.bytes -= overhead(src.value);
  const at = locate(doc.root, path, true);
  if (!at.ok) {
    rollback(doc, undo, start, before);
    return at.error;
  }
  // The value's bytes move with it, but its member name may be longer than
  // the one it leaves: that growth counts against the limit too.
  const grows = overhead(at.value) - replacedBytes(doc, at.value);
  if (doc.bytes + grows > limits.maxStateBytes) {
    const actual = doc.bytes + grows;
    rollback(doc, undo, start, before);
    return limitError("maxStateBytes", limits.maxStateBytes, actual, `${where(path, path.length)}: the state would grow too large`);
  }
  doc.bytes += grows;
  attach(doc, at.value, value, undo);
  // The move took the value out of its old place, which may have been the deepest.
  doc.loose = true;
  if (depth > doc.depth) doc.depth = depth;
  return undefined;
}

/** What a rollback restores besides the undo log: the byte count and the nesting bound. */
export interface Mark {
  bytes: number;
  depth: number;
}

export const mark = (doc: Doc): Mark => ({ bytes: doc.bytes, depth: doc.depth });

export function rollback(doc: Doc, undo: Undo[], at: number, before: Mark): void {
  while (undo.length > at) (undo.pop() as Undo)();
  doc.bytes = before.bytes;
  // The bound must cover the document as it was again; what was undone may have raised it.
  doc.depth = Math.max(doc.depth, before.depth);
  doc.loose = true;
}
