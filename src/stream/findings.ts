import jsonpatch, { type Operation } from "fast-json-patch";
import { decodeOp, escapeSegment, formatPointer, hasMember, isObject, parsePointer, type Json } from "../core/index.js";
import { CLIENT_SSE_LIMIT } from "./events.js";
import { coreReading } from "./mirror.js";
import type { StreamFinding } from "../protocol/types.js";
import type { OpProblem } from "./schema.js";
import type { Change } from "./snapshots.js";

/** What the client does with an event as it was sent (protocol/README.md §13). */
export const KINDS = ["dropped", "ignored", "fatal", "wiped"] as const;
export type Kind = (typeof KINDS)[number];

/**
 * What the tool that read the stream did with the op or event a finding is
 * about: `check` sends nothing, so its findings are all `passed` (the client
 * gets the event as sent); `fix` and `proxy` say what they wrote. The one
 * list of these words: every reader prints them as they are, in text, JSON
 * and logs alike (§13); the protocol's StreamFinding lists the same (below).
 */
export const OUTCOMES = ["passed", "mended", "discarded", "kept"] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** A count of each outcome, all 0. */
export const noOutcomes = (): Record<Outcome, number> => ({ passed: 0, mended: 0, discarded: 0, kept: 0 });

/** A count of each kind, all 0. */
export const noKinds = (): Record<Kind, number> => ({ dropped: 0, ignored: 0, fatal: 0, wiped: 0 });

/** The closed sets are the protocol's (protocol/openrpc.json, StreamFinding): this fails to compile if they part. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Holds<T extends true> = T;
export type SetsAreTheProtocols = Holds<[Same<Outcome, StreamFinding["outcome"]>, Same<Kind, NonNullable<StreamFinding["kind"]>>, Same<Required<Finding & Stops>, Required<StreamFinding>>] extends [true, true, true] ? true : false>;

/** One event the client would not apply, or a snapshot that wipes what it held (protocol/README.md §13). */
export interface Finding {
  /** 1-based number of the event in the stream. */
  event: number;
  /** The event's first line in the input, 1-based. */
  line: number;
  kind: Kind;
  type: string;
  /** The op's position in the event's patch, as sent. */
  index?: number;
  pointer?: string;
  /** A skip code (§4), or one of §13's event codes. */
  code: string;
  message: string;
  hint?: string;
  outcome: Outcome;
}

/**
 * The op of a delta the client stops at, as sent: the first that fails as
 * it applies the ops in order, where it drops the whole delta (§13,
 * `stops`). The other findings about ops of the same delta name the ops
 * that fail too. A member the finding object carries after `outcome`, on
 * that one finding only; the inspector's API mirrors Finding's type, so it
 * is declared here until the API lists it too.
 */
export interface Stops {
  stops?: true;
}

/** Whether a finding names the op the client stops at (Stops). */
export const stopsHere = (f: Reported): boolean => (f as Stops).stops === true;

/**
 * A finding of a repair's about an op of a delta the client would have
 * applied as sent, which the repair sent rewritten or left out all the same
 * (§5 rules 6 and 7, or an op fast-json-patch takes that RFC 6902 refuses):
 * a Finding without a kind, since the client does nothing amiss with the
 * event. The inspector lists it too (its API's FindingView has an optional kind).
 */
export type Applies = Omit<Finding, "kind">;

/** What a repair reports: its findings, and those about deltas the client would have applied. */
export type Reported = Finding | Applies;

/** Whether a reported finding has a kind: every one but Applies. */
export const hasKind = (f: Reported): f is Finding => "kind" in f;

/**
 * The findings among `fs` that have a kind: `fs` itself when all do (every
 * one of check's; fix's but for Applies), so that the usual event costs no copy.
 */
export function kinded(fs: readonly Reported[]): readonly Finding[] {
  return fs.every(hasKind) ? (fs as readonly Finding[]) : fs.filter(hasKind);
}

/** A finding without a kind (Applies), its members in Finding's order but for the kind. */
export function applies(at: At, f: OpFinding, outcome: Outcome): Applies {
  const out = finding(at, "dropped", f, outcome) as Partial<Finding>;
  delete out.kind;
  return out as Applies;
}

/** Where an event sits in the input: what every finding about it names. */
export interface At {
  readonly event: number;
  readonly line: number;
  readonly type: string;
}

/** The op-level part of a finding. */
export interface OpFinding {
  index?: number;
  pointer?: string;
  code: string;
  message: string;
  hint?: string;
}

export function finding(at: At, kind: Kind, f: OpFinding, outcome: Outcome = "passed"): Finding {
  const out = { event: at.event, line: at.line, kind, type: at.type } as Finding;
  if (f.index !== undefined) out.index = f.index;
  if (f.pointer !== undefined) out.pointer = f.pointer;
  out.code = f.code;
  out.message = f.message;
  if (f.hint !== undefined) out.hint = f.hint;
  out.outcome = outcome;
  return out;
}

/**
 * Who reads the findings: `check` (its hints may point to `fix`, which
 * mends the case) or `fix` (which is running: its outcome says what it did,
 * and a hint never tells it to do so).
 */
export type Reader = "check" | "fix";

/** A hint's note that `fix` mends the case: for check's reader only. */
const fixes = (reader: Reader, what = "`fix` does this"): string => (reader === "check" ? ` (${what})` : "");

// ------------------------------------------------------------ the texts, written once

/** What a stream framed with CR LF (or CR) should do instead, for check's reader. */
export const LF_HINT = "end SSE lines with LF alone (`fix` writes them so)";

export const TEXT = {
  unknownActivity: (id: string, reader: Reader): OpFinding => ({
    code: "UNKNOWN_ACTIVITY",
    message: `the client has no activity ${JSON.stringify(id)} and skips the delta without a word`,
    hint: `send an ACTIVITY_SNAPSHOT for ${JSON.stringify(id)} before its deltas${fixes(reader, "`fix` drops this one")}`,
  }),
  notAnActivity: (id: string, role: string): OpFinding => ({
    code: "NOT_AN_ACTIVITY",
    message: `message ${JSON.stringify(id)} is a ${role} message, not an activity: the client warns and skips the delta`,
  }),
  activityIdClash: (id: string, text: boolean): OpFinding => ({
    code: "ACTIVITY_ID_CLASH",
    message: `message ${JSON.stringify(id)} is an activity: the client warns and drops the ${text ? "text" : "reasoning"} (message ids are unique across activity and other messages)`,
  }),
  unknownMessage: (id: string): OpFinding => ({ code: "UNKNOWN_MESSAGE", message: `the client has no message ${JSON.stringify(id)}: it warns and drops the event` }),
  unknownEvent: (type: string): OpFinding => ({ code: "UNKNOWN_EVENT", message: `the client drops an event of unknown type ${JSON.stringify(type)}, with a warning` }),
  /**
   * More than CLIENT_SSE_LIMIT of text without an event boundary: the
   * client's SSE parser stops and the run fails; fix holds no more of the
   * stream and passes the rest on as it comes (its outcome is `passed`).
   */
  bufferLimit: (reader: Reader, crs: boolean): Omit<OpFinding, "index" | "pointer"> => ({
    code: "SSE_BUFFER_LIMIT",
    message:
      `${CLIENT_SSE_LIMIT / (1024 * 1024)} MiB of text without an event boundary: @ag-ui/client 1.0.0's SSE parser stops there and the run fails` +
      (reader === "fix" ? "; the rest of the stream is passed on as it comes, unread" : ""),
    ...(crs && reader === "check" ? { hint: `the stream ends its lines with CR LF (or CR), and the client splits events only at two LFs: ${LF_HINT}` } : {}),
  }),
  /** What the client does after a patch fails: it keeps what it had. */
  keeps: (activity: boolean): string => (activity ? "the client warns and keeps the activity as it was" : "the client warns and keeps its state"),
  /**
   * A STATE_SNAPSHOT that removes or replaces a member the client held and
   * no event of the stream set; or, `kept` (fix under --own left what the
   * client holds standing), one that differs from the client outside the
   * owned members, a member the client does not hold included.
   */
  wiped: (pointer: string, change: Change, kept: boolean): OpFinding => ({
    pointer,
    code: "SNAPSHOT_WIPE",
    message: kept
      ? change === "adds"
        ? `the snapshot sets ${pointer}, which the server does not own (--own) and the client does not hold: it is not applied, and the client goes on without it`
        : `the snapshot ${change === "removes" ? "leaves out" : "gives another value for"} ${pointer}, which the server does not own (--own): the client's value stands`
      : `the snapshot ${change} ${pointer}, which the client held and no event of the stream set: the client's value is lost`,
    hint: "send a STATE_DELTA on your own namespace (`fix --own`)",
  }),
} as const;

/** A value as a finding's message names it: its JSON type, and the value itself when short. */
function described(v: Json): string {
  const type = v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "string" ? "a string" : typeof v === "number" ? "a number" : typeof v === "boolean" ? "a boolean" : "an object";
  const text = JSON.stringify(v);
  return v === null ? "null" : text.length <= 40 ? `${type}, ${text}` : type;
}

/** The texts of the findings about a STATE_SNAPSHOT and about ops fix changed without the client refusing them. */
export const SNAPSHOT_TEXT = {
  /**
   * SNAPSHOT_REPLACES_UNKNOWN (§13): the client's state before the stream is
   * not known (no --state), and no snapshot of the stream has replaced it
   * yet: this one replaces whatever the client held, its own keys included.
   */
  replacesUnknown: (reader: Reader): OpFinding => ({
    code: "SNAPSHOT_REPLACES_UNKNOWN",
    message:
      reader === "check"
        ? "the snapshot replaces the client's whole state, and what the client held before the stream is not known (no --state): every member of its own that the snapshot does not repeat is lost"
        : "the snapshot goes as it came and replaces the client's whole state, and what the client held before the stream is not known (no --state): every member of its own that the snapshot does not repeat is lost",
    hint:
      reader === "check"
        ? "if the client keeps keys of its own, send a STATE_DELTA on your own namespace, or run behind `fix --own POINTER`; give what the client holds with --state FILE (`{}` when it keeps nothing) to name each member it loses"
        : "if the client keeps keys of its own, run with --own POINTER; give what the client holds with --state FILE to name each member it loses",
  }),
  /**
   * ROOT_NOT_OBJECT at a STATE_SNAPSHOT (§11, §13): the client takes any
   * JSON as its state; after one that is not an object it has lost every
   * member, and no delta written for an object applies.
   */
  notObject: (value: Json, reader: Reader): OpFinding => ({
    code: "ROOT_NOT_OBJECT",
    message:
      reader === "check"
        ? `the snapshot is ${described(value)}, not an object: the client's state becomes that value, every member it held is lost, and a later STATE_DELTA written for an object no longer lands where it was meant to`
        : `the snapshot is ${described(value)}, not an object (protocol/README.md §11): it is left out, the client keeps the state it holds, and later deltas are mended against that state`,
    ...(reader === "check" ? { hint: "send the state as an object (`fix` leaves such a snapshot out)" } : {}),
  }),
  /** A delta the client drops after a snapshot that was not an object: the cause, for its hint. */
  afterNotObject: (event: number): string => `the client's state is not an object since the STATE_SNAPSHOT of event ${event} (ROOT_NOT_OBJECT)`,
  /** An op fix applied to its mirror but that leaves no op in the delta it sends (§5 rules 6 to 8). */
  nothingMoved: (): Omit<OpFinding, "index" | "pointer"> => ({
    code: "NOTHING_MOVED",
    message: "the op leaves the state as it is (a test, or a move or copy onto itself: protocol/README.md §5 rules 6 to 8), so the mended delta leaves it out",
  }),
  /** An op fix applied, written as other ops the client and every JSON Patch library read alike (§5 rules 2, 3, 6, 7). */
  rewritten: (): Omit<OpFinding, "index" | "pointer"> => ({
    code: "REWRITTEN",
    message: "the op is sent rewritten, as ops that every JSON Patch library applies alike (protocol/README.md §5 rules 2, 3, 6 and 7)",
  }),
} as const;

export const UNUSABLE = "the client holds a value that is not JSON (an earlier op moved the root into itself, or a missing value onto it), so no patch applies to it any more";
/** UNUSABLE_STATE for a move or copy after an op of the same patch left a cycle (see patchVerdicts). */
export const UNUSABLE_MIDWAY = "an earlier op of this patch moved or copied the root into itself, and the client checks a move or copy on a copy of the document made through JSON, which throws on the cycle: it drops the whole patch";

/** Whether the client can copy a value with structuredClone, as it does every state and content it keeps. */
export function cloneable(v: unknown): boolean {
  try {
    structuredClone(v);
    return true;
  } catch {
    return false;
  }
}

/**
 * INHERITED_MEMBER: fast-json-patch reads `obj[key]`, so `/constructor` or
 * `/toString` "exist" on every object and a move or copy from them puts a
 * function in the document. The patch applies; the client's structuredClone
 * of the result then throws: outside any try for the state (the run fails),
 * inside the patch's try for an activity (a warning).
 */
export function inherited(activity: boolean): { code: string; message: string } {
  const what = "the patch reads a member every object inherits (such as `constructor` or `toString`), which fast-json-patch takes for a member, and the result holds a function";
  return { code: "INHERITED_MEMBER", message: activity ? `${what}: the client cannot copy the patched content, warns, and keeps the activity as it was` : `${what}: copying the new state fails, and so does the client's run` };
}

/** Whether the client can print (and copy) a value: JSON.stringify neither throws nor gives undefined. */
export function printable(v: unknown): boolean {
  try {
    return JSON.stringify(v) !== undefined;
  } catch {
    return false;
  }
}

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
