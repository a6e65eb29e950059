import { readFileSync } from "node:fs";
import { err, formatPointer, isObject, ok, stateOverLimit, type Json, type Result, type StateLimits } from "../core/index.js";
import { parseJson } from "../json/parse.js";
import { scanJson } from "../json/scan.js";
import { locateSyntaxError } from "../json/syntax-error.js";
import { DEFAULT_LIMITS, ENVELOPE_DEPTH } from "../protocol/limits.js";

/**
 * The one reader of every JSON input a command takes (a file, stdin, a
 * `--state`): it holds the input to the sidecar's own rules, so a command
 * accepts what the RPC accepts and no more.
 * - numbers (protocol/README.md §3): an integer beyond ±(2^53 − 1), or a number beyond a double's range, is refused;
 *   in a state the client holds, such an integer is the double the client's JSON.parse reads;
 * - nesting and size (§7): a state is held to --max-depth and
 *   --max-state-bytes at their defaults, a list of ops to --max-depth below
 *   its envelope, as the RPC's `normalize` holds its params;
 * - the root (§11): a state is a JSON object; a list of ops is an array.
 * A UTF-8 byte order mark at the start is skipped (RFC 8259 §8.1).
 */

/**
 * What an input is meant to be. A "client-state" is a state the client holds (`check`'s and `fix`'s
 * `--state`): read as the client reads it (protocol/README.md §3, baselines).
 */
export type InputKind = "state" | "client-state" | "ops";

/** Why an input was refused: the protocol's codes where it has one (§8), UNREADABLE for a file that cannot be read. */
export type InputCode = "UNREADABLE" | "PARSE_ERROR" | "UNSAFE_INTEGER" | "NUMBER_OVERFLOW" | "LIMIT_EXCEEDED" | "ROOT_NOT_OBJECT" | "INVALID_VALUE";

export interface InputProblem {
  /** The file as named on the command line, or "stdin" for "-". */
  source: string;
  /** RFC 6901: where in the input; "" for the whole of it. */
  pointer: string;
  code: InputCode;
  message: string;
}

/** The limits a state is held to: the sidecar's defaults (§7). */
const STATE_LIMITS: StateLimits = { maxDepth: DEFAULT_LIMITS.maxDepth, maxStateBytes: DEFAULT_LIMITS.maxStateBytes };
/** An ops file is the `ops` param: the params object is the one envelope level it lacks (§7). */
const OPS_NESTING = DEFAULT_LIMITS.maxDepth + ENVELOPE_DEPTH - 1;

const EVERY_MEMBER = (): boolean => true;

/** One line for stderr, the same shape for every problem: `SOURCE at "POINTER": CODE: message`. */
export const describeInput = (p: InputProblem): string => `${p.source} at ${JSON.stringify(p.pointer)}: ${p.code}: ${p.message}`;

/** A file (or stdin) that could not be read at all. */
export function unreadable(file: string, e: unknown): InputProblem {
  const why = e as NodeJS.ErrnoException;
  // Node's message repeats the code and the path ("ENOENT: no such file or directory, open 'x'"): keep the reason.
  const reason = why.message.replace(/^[A-Z]+: /, "").replace(/, \w+ '.*'$/, "");
  return { source: file === "-" ? "stdin" : file, pointer: "", code: "UNREADABLE", message: `cannot read it: ${reason}${why.code ? ` (${why.code})` : ""}` };
}

/** Reads `file` ("-" for stdin) and decodes it as `kind`. */
export function readJsonInput(file: string, kind: InputKind, readStdin: () => string = () => readFileSync(0, "utf8")): Result<Json, InputProblem> {
  let text: string;
  try {
    text = file === "-" ? readStdin() : readFileSync(file, "utf8");
  } catch (e) {
    return err(unreadable(file, e));
  }
  return decodeJsonInput(text, file === "-" ? "stdin" : file, kind);
}

/** Decodes text as `kind`, in the order the RPC checks params: syntax, numbers and nesting, the root, then size. */
export function decodeJsonInput(text: string, source: string, kind: InputKind): Result<Json, InputProblem> {
  const problem = (pointer: string, code: InputCode, message: string) => err<InputProblem>({ source, pointer, code, message });
  let value: Json;
  // RFC 8259 §8.1: a parser may ignore a byte order mark, and editors on Windows write one.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  try {
    value = parseJson(text) as Json;
  } catch (e) {
    const at = locateSyntaxError(text);
    return problem(at?.pointer ?? "", "PARSE_ERROR", at ? `not JSON at line ${at.line}, column ${at.column}: ${at.message}` : `not JSON: ${(e as Error).message}`);
  }
  const maxNesting = kind === "ops" ? OPS_NESTING : STATE_LIMITS.maxDepth;
  const found = scanJson(value, maxNesting, kind === "client-state" ? EVERY_MEMBER : undefined);
  if (found) {
    switch (found.kind) {
      case "unsafe-integer":
        return problem(found.field, "UNSAFE_INTEGER", `the integer ${found.source.slice(0, 40)} is beyond ±(2^53 − 1), which JSON readers do not all hold exactly (protocol/README.md §3): send it as a string`);
      case "overflow":
        return problem(found.field, "NUMBER_OVERFLOW", `the number ${found.source.slice(0, 40)} is beyond the range of a double`);
      case "too-deep":
        return problem(pointerPast(value, maxNesting), "LIMIT_EXCEEDED", `nested deeper than maxDepth (${DEFAULT_LIMITS.maxDepth}${kind === "ops" ? " below an op's value" : ""})`);
      default: {
        // A kind added to ScanProblem must be given its code here: this line stops the build until it is.
        const unhandled: never = found;
        return unhandled;
      }
    }
  }
  if (kind === "ops") return Array.isArray(value) ? ok(value) : problem("", "INVALID_VALUE", "expected a JSON array of RFC 6902 ops");
  if (!isObject(value)) return problem("", "ROOT_NOT_OBJECT", `a state must be a JSON object, not ${Array.isArray(value) ? "an array" : value === null ? "null" : typeof value === "object" ? "a number" : `a ${typeof value}`} (protocol/README.md §11)`);
  const over = stateOverLimit(value, STATE_LIMITS);
  if (over) return problem("", "LIMIT_EXCEEDED", `${over.limit} is ${over.max}; this state reaches at least ${over.actual}`);
  return ok(value);
}

/** The pointer of the first container nested past `max` (scanJson says only how deep); its walk stops there. */
function pointerPast(value: Json, max: number): string {
  const path: string[] = [];
  const walk = (v: Json, depth: number): boolean => {
    if (!Array.isArray(v) && !isObject(v)) return false;
    if (depth > max) return true;
    for (const [k, child] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
      path.push(String(k));
      if (walk(child, depth + 1)) return true;
      path.pop();
    }
    return false;
  };
  return walk(value, 1) ? formatPointer(path) : "";
}
