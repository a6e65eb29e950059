import { opError, type OpError } from "./errors.js";
import { numberIn } from "./float.js";
import { isObject, type Json } from "./json.js";
import type { Op } from "./ops.js";
import { clip, parsePointer } from "./pointer.js";
import { err, ok, type Result } from "./result.js";

/** An op as received: decoded into an Op, or refused by the decoder. */
export type Decoded = Result<Op, OpError>;

/**
 * Decodes one op as received into an Op with parsed paths. This is the only
 * place raw op objects are read; a malformed op is an error value here, so a
 * lenient call can skip it and go on (protocol/README.md §4: INVALID_OP, INVALID_POINTER).
 *
 * A path may be an RFC 6901 string or an array of raw segments (protocol/README.md §3);
 * integers in an array path are array indexes and become their decimal token.
 */
export function decodeOp(raw: unknown): Decoded {
  if (!isObject(raw)) return err(opError("INVALID_OP", "an op must be an object"));
  const name = raw["op"];
  if (typeof name !== "string") return err(opError("INVALID_OP", 'an op needs an "op" member that is a string'));
  if (!("path" in raw) || raw["path"] === undefined) return err(opError("INVALID_OP", `${clip(name)}: missing "path"`));
  const text = raw["path"];
  const path = decodePath(text);
  if (!path.ok) return path;
  // The path's text, for the wire (ops.ts): one shape for every decoded op, so undefined rather than absent.
  const pointer = typeof text === "string" ? text : undefined;
  switch (name) {
    case "add":
    case "replace":
    case "test": {
      // RFC 6902 §4.1: "value" is required; null is a value.
      if (!("value" in raw) || raw["value"] === undefined) return err(opError("INVALID_OP", `${name}: missing "value"`));
      return ok({ op: name, path: path.value, value: raw["value"] as Json, pointer });
    }
    case "remove":
      return ok({ op: "remove", path: path.value, pointer });
    case "move":
    case "copy": {
      if (!("from" in raw) || raw["from"] === undefined) return err(opError("INVALID_OP", `${name}: missing "from"`));
      const from = decodePath(raw["from"]);
      if (!from.ok) return from;
      return ok({ op: name, from: from.value, path: path.value, pointer });
    }
    default:
      return err(opError("INVALID_OP", `unknown op ${JSON.stringify(clip(name))}`));
  }
}

export const decodeOps = (raw: readonly unknown[]): Decoded[] => raw.map(decodeOp);

export function decodePath(raw: unknown): Result<string[], OpError<"INVALID_POINTER">> {
  if (typeof raw === "string") {
    const parsed = parsePointer(raw);
    return parsed.ok ? parsed : err(opError("INVALID_POINTER", parsed.error.message));
  }
  if (Array.isArray(raw)) {
    const out = new Array<string>(raw.length);
    for (let i = 0; i < raw.length; i++) {
      const s = raw[i] as unknown;
      // An index written as a float (`0.0`, an IntegralFloat) is the integer it holds, as JSON Schema's "integer" has it.
      const n = typeof s === "string" ? undefined : numberIn(s);
      if (typeof s === "string") out[i] = s;
      else if (n !== undefined && Number.isSafeInteger(n) && n >= 0) out[i] = String(n);
      else return err(opError("INVALID_POINTER", `path segment ${i} must be a string or a non-negative integer`));
    }
    return ok(out);
  }
  return err(opError("INVALID_POINTER", "a path must be a pointer string or an array of segments"));
}
