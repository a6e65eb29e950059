import type { Json } from "./json.js";
import { formatPointer, type Path } from "./pointer.js";

/** An RFC 6902 operation whose pointers have been parsed (decoded once, at the edge). */
export type Op = ChangeOp | { op: "test"; path: Path; value: Json; pointer?: string | undefined };

/**
 * An op that changes the document: every op but `test`. A test is checked
 * against the mirror and dropped, never replayed (protocol/README.md §3), so
 * what a patch applied, and every delta, holds only these.
 *
 * `pointer` is `path`'s RFC 6901 text when the op was decoded from a string:
 * parsing and formatting are inverses (§3 of RFC 6901 gives each token one
 * escaped form), so toWireOp sends it as it came instead of escaping every
 * token again. Only decodeOp sets it, and no op is ever made by copying
 * another with a different path.
 */
export type ChangeOp =
  | { op: "add" | "replace"; path: Path; value: Json; pointer?: string | undefined }
  | { op: "remove"; path: Path; pointer?: string | undefined }
  | { op: "move" | "copy"; from: Path; path: Path; pointer?: string | undefined };

/** A ChangeOp as it travels in a STATE_DELTA: escaped pointer strings (the document's OutOp). */
export type WireOp =
  | { op: "add" | "replace"; path: string; value: Json }
  | { op: "remove"; path: string }
  | { op: "move" | "copy"; from: string; path: string };

export function toWireOp(op: ChangeOp): WireOp {
  switch (op.op) {
    case "add":
      return { op: "add", path: op.pointer ?? formatPointer(op.path), value: op.value };
    case "replace":
      // protocol/README.md §5 rule 7: python-json-patch refuses a replace whose
      // last token is "-" even on an object member of that name. A replace
      // that applied names an existing member (an array has no element "-"),
      // and RFC 6902 §4.1 makes an add on an existing member replace it.
      return { op: op.path[op.path.length - 1] === "-" ? "add" : "replace", path: op.pointer ?? formatPointer(op.path), value: op.value };
    case "remove":
      return { op: "remove", path: op.pointer ?? formatPointer(op.path) };
    case "move":
    case "copy":
      return { op: op.op, from: formatPointer(op.from), path: op.pointer ?? formatPointer(op.path) };
  }
}
