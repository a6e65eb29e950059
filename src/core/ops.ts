import type { Json } from "./json.js";
import { formatPointer, type Path } from "./pointer.js";

/** An RFC 6902 operation whose pointers have been parsed (decoded once, at the edge). */
export type Op =
  | { op: "add" | "replace" | "test"; path: Path; value: Json }
  | { op: "remove"; path: Path }
  | { op: "move" | "copy"; from: Path; path: Path };

/** The same operation as it travels in a STATE_DELTA: escaped pointer strings. */
export type WireOp =
  | { op: "add" | "replace" | "test"; path: string; value: Json }
  | { op: "remove"; path: string }
  | { op: "move" | "copy"; from: string; path: string };

export function toWireOp(op: Op): WireOp {
  switch (op.op) {
    case "add":
    case "replace":
    case "test":
      return { op: op.op, path: formatPointer(op.path), value: op.value };
    case "remove":
      return { op: "remove", path: formatPointer(op.path) };
    case "move":
    case "copy":
      return { op: op.op, from: formatPointer(op.from), path: formatPointer(op.path) };
  }
}
