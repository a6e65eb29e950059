/**
 * fast-json-patch's verdict on a patch, op by op, and the hints that go with
 * each refused op: what the client does with a delta, worked out by running
 * the very library it runs (protocol/README.md §4, §13).
 */
import jsonpatch, { type Operation } from "fast-json-patch";
import { decodeOp, escapeSegment, formatPointer, hasMember, isObject, parsePointer, type Json } from "../core/index.js";
import { coreReading } from "./mirror.js";
import type { OpProblem } from "./schema.js";
import { UNUSABLE, cloneable, fixes, printable, type OpFinding, type Reader } from "./findings.js";

/** UNUSABLE_STATE for a move or copy after an op of the same patch left a cycle (see patchVerdicts). */
export const UNUSABLE_MIDWAY = "an earlier op of this patch moved or copied the root into itself, and the client checks a move or copy on a copy of the document made through JSON, which throws on the cycle: it drops the whole patch";

/** fast-json-patch's error names, as skip codes (protocol/README.md §4). */
const FJP_CODES: Record<string, string> = {
  OPERATION_NOT_AN_OBJECT: "INVALID_OP",
  OPERATION_OP_INVALID: "INVALID_OP",
  OPERATION_PATH_INVALID: "INVALID_POINTER",
  OPERATION_FROM_REQUIRED: "INVALID_OP",
  OPERATION_VALUE_REQUIRED: "INVALID_OP",
  OPERATION_VALUE_CANNOT_CONTAIN_UNDEFINED: "INVALID_OP",
  OPERATION_PATH_CANNOT_ADD: "PATH_NOT_FOUND",
  OPERATION_PATH_UNRESOLVABLE: "PATH_NOT_FOUND",
  OPERATION_FROM_UNRESOLVABLE: "FROM_NOT_FOUND",
  OPERATION_PATH_ILLEGAL_ARRAY_INDEX: "INVALID_INDEX",
  OPERATION_VALUE_OUT_OF_BOUNDS: "INDEX_OUT_OF_BOUNDS",
  TEST_OPERATION_FAILED: "TEST_FAILED",
};

const code = (s: string): string => "`" + s + "`";
const pathOf = (op: unknown): string | undefined => {
  const path = isObject(op) ? op["path"] : undefined;
  return typeof path === "string" ? path : undefined;
};

/**
 * Runs `fn` with stack traces off: fast-json-patch signals each failure with
 * an Error, whose stack V8 would capture at a cost many times that of the op.
 */
function quietly<T>(fn: () => T): T {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return fn();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * fast-json-patch's verdict on a patch, as `applyPatch(doc, patch, true,
 * false)` reaches it (one copy of the document, then the ops in order, each
 * validated): every op that fails, in order, each with where and why; empty
 * when the patch applies. The first is the op the client stops at: it drops
 * the whole patch there. Each later one is an op that fails too, against the
 * document as the ops before it that apply leave it, the failing ones
 * skipped (protocol/README.md §13): the ops to take out for the rest to
 * apply. The op is found by applying the ops one at a time, since the
 * library's own error says index 0 for every failure its validator finds.
 * The code is the project's core's reading of that op against the document
 * as it stood before it, which names the failing step; where the core would
 * have applied the op (fast-json-patch walks a move's target before the
 * removal, §5 rule 6), fast-json-patch's error name is mapped. `indexOf`
 * maps a position in the patch the client applied back to the op's position
 * as sent (the schema stage may have stripped ops before it). Called only
 * for a patch that needs it (the client refused it, or fix mends it): the
 * copies it makes are off the path of a patch that applies.
 */
export function patchVerdicts(doc: Json, patch: readonly unknown[], indexOf: (i: number) => number, reader: Reader): readonly OpFinding[] {
  return quietly(() => {
    let work: Json;
    try {
      work = jsonpatch.deepClone(doc) as Json;
    } catch {
      // applyPatch copies the document through JSON first. That fails only once the client holds
      // something that is not JSON, which fast-json-patch itself can leave: a cycle (a move or copy of
      // the root into itself) or undefined (a move of a missing value onto the root).
      return [{ index: indexOf(0), code: "UNUSABLE_STATE", message: UNUSABLE }];
    }
    // fast-json-patch inserts an op's value by reference, and a later op may change it: the ops are copied.
    const ops = jsonpatch.deepClone(patch) as unknown[];
    const out: OpFinding[] = [];
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i];
      const copies = isObject(op) && (op["op"] === "move" || op["op"] === "copy");
      // fast-json-patch validates a move or a copy by applying its `from` to a copy of the document made
      // through JSON, which throws (a TypeError, not one of its own) once an earlier op of this patch left
      // a cycle in it: the client drops the whole patch, with a warning (its state before the patch prints).
      if (copies && !printable(work)) {
        out.push({ index: indexOf(i), code: "UNUSABLE_STATE", message: UNUSABLE_MIDWAY });
        continue;
      }
      // A move that fails may have taken its value out already: the document before it is kept, to go on from.
      const before = copies && op["op"] === "move" ? (jsonpatch.deepClone(work) as Json) : undefined;
      try {
        work = jsonpatch.applyOperation(work, op as Operation, true, true, true, i).newDocument as Json;
        continue;
      } catch (error) {
        out.push(explain(before ?? work, patch[i], error, indexOf(i), reader));
      }
      if (before !== undefined) work = before;
    }
    if (out.length > 0) return out;
    return cloneable(work) ? NO_VERDICTS : [INHERITS];
  });
}

const NO_VERDICTS: readonly OpFinding[] = Object.freeze([]);

/** The op the client stops at, as patchVerdicts finds it: undefined when the patch applies. */
export function patchVerdict(doc: Json, patch: readonly unknown[], indexOf: (i: number) => number, reader: Reader): OpFinding | undefined {
  return patchVerdicts(doc, patch, indexOf, reader)[0];
}

/** patchVerdict's answer for a patch that applies but leaves a function in the document (see inherited). */
export const INHERITS: OpFinding = { code: "INHERITED_MEMBER", message: "" };

/** The finding for op `op`, which fast-json-patch refused with `error` against `before`. */
function explain(before: Json, op: unknown, error: unknown, index: number, reader: Reader): OpFinding {
  const name = (error as { name?: string }).name ?? "";
  const mapped = { code: error instanceof TypeError && /__proto__/.test(error.message) ? "FORBIDDEN_KEY" : (FJP_CODES[name] ?? "INVALID_OP"), message: (error as Error).message };
  const decoded = decodeOp(op);
  let why: { code: string; message: string } = decoded.ok ? mapped : decoded.error;
  let hint: string | undefined;
  if (decoded.ok && printable(before)) {
    why = coreReading(before, decoded.value) ?? mapped;
    hint = opHint(before, op as Record<string, unknown>, why.code, reader);
  }
  const out: OpFinding = { index, code: why.code, message: why.message };
  const pointer = pathOf(op);
  if (pointer !== undefined) out.pointer = pointer;
  if (hint) out.hint = hint;
  return out;
}

/** The findings for a patch the client refused (`applyPatch` threw): patchVerdicts', which are then never none. */
export function diagnosePatch(doc: Json, patch: readonly unknown[], indexOf: (i: number) => number, reader: Reader): readonly OpFinding[] {
  const fs = patchVerdicts(doc, patch, indexOf, reader);
  return fs.length > 0 && fs[0] !== INHERITS ? fs : [{ index: indexOf(0), code: "INVALID_OP", message: "the client refused the patch" }];
}

/** Hints for an op the schema stage refused or stripped, chosen by the rule it breaks. */
export function schemaHint(op: unknown, why: OpProblem["why"]): string | undefined {
  if (!isObject(op)) return undefined;
  const o = op;
  for (const k of ["path", "from"]) {
    const p = o[k];
    if (typeof p !== "string") continue;
    if (/~(?![01])/.test(p)) return `a ${code("~")} in a key is written ${code("~0")}: write ${code(p.replace(/~(?![01])/g, "~0"))}`;
    if (p !== "" && !p.startsWith("/")) return `a pointer starts with ${code("/")}: write ${code("/" + p.split("/").map((s) => escapeSegment(s)).join("/"))}`;
  }
  if (why === "missing-value") return `${code(String(o["op"]))} needs a ${code("value")} (null is a value)`;
  if (why === "unknown-op") return `the ops are add, remove, replace, move, copy and test`;
  return undefined;
}

/** Where a path first leaves the document: the number of tokens that exist. */
function reach(doc: Json, tokens: readonly string[]): { depth: number; container: Json } {
  let cur = doc;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as string;
    if (isObject(cur) && hasMember(cur, t)) cur = cur[t] as Json;
    else if (Array.isArray(cur) && /^(0|[1-9][0-9]*)$/.test(t) && Number(t) < cur.length) cur = cur[Number(t)] as Json;
    else return { depth: i, container: cur };
  }
  return { depth: tokens.length, container: cur };
}

/**
 * A hint for an op that failed against `doc`: a key with an unescaped "/"
 * (ag-ui #2242), a missing array before an append, a replace of a member that
 * is not there (CopilotKit #4934, soliplex #1255), an index past the end.
 */
function opHint(doc: Json, op: Record<string, unknown>, why: string, reader: Reader): string | undefined {
  const path = op["path"] as string;
  const parsed = parsePointer(path);
  if (!parsed.ok || parsed.value.length === 0) return undefined;
  const tokens = parsed.value;
  const { depth, container } = reach(doc, tokens);
  const missing = formatPointer(tokens.slice(0, depth + 1));
  if (depth < tokens.length && isObject(container)) {
    // A key that holds "/" and was not escaped: the rest of the path read as one key.
    for (let m = tokens.length; m > depth + 1; m--) {
      const key = tokens.slice(depth, m).join("/");
      if (hasMember(container, key)) return `the key contains ${code("/")}: write ${code(formatPointer([...tokens.slice(0, depth), key, ...tokens.slice(m)]))}`;
    }
  }
  if (why === "PATH_NOT_FOUND" && depth < tokens.length) {
    const last = depth === tokens.length - 1;
    if (op["op"] === "add" && depth === tokens.length - 2 && tokens[tokens.length - 1] === "-" && isObject(container)) {
      return `${code(missing)} does not exist: add it as ${code("[]")} first${fixes(reader)}`;
    }
    if (op["op"] === "replace" && last && isObject(container)) {
      return `${code(missing)} does not exist, and replace needs a member that exists: use add${fixes(reader)}`;
    }
    if (!last && isObject(container)) {
      const rest = tokens.slice(depth).join("/");
      return `${code(missing)} does not exist. If ${code(rest)} is one key, write ${code(formatPointer([...tokens.slice(0, depth), rest]))}; otherwise add ${code(missing)} first`;
    }
  }
  if (why === "INDEX_OUT_OF_BOUNDS" && op["op"] === "add" && depth === tokens.length - 1 && Array.isArray(container)) {
    return `the array has ${container.length} elements: append with ${code(formatPointer([...tokens.slice(0, -1), "-"]))}`;
  }
  return undefined;
}
