import { EventSchemas } from "@ag-ui/core/schemas";
import { isObject, isPointer } from "../core/index.js";

/**
 * The schema stage of @ag-ui/client 1.0.0 (`enforceEvents`, src/enforce/ in
 * the package's sources), which every event passes before verifyEvents:
 * - an event whose `type` the protocol does not know is dropped, with a warning;
 * - material the schema does not describe is stripped, each with a warning:
 *   an unknown member of an event, and an element of a discriminated union
 *   whose tag is unknown (in a patch: an op whose `op` is not one of RFC
 *   6902's six), which leaves the array without it;
 * - then the event's schema parses what is left, and a failure is fatal: the
 *   client's run errors.
 */

/**
 * A zod v4 schema, read through its public `_zod.def` (no zod import: it is a
 * transitive dependency). The members read here are named, each `unknown`, so
 * that @ag-ui/core's typed schemas fit this shape as they are, with no cast.
 */
interface Zod {
  _zod: { def: ZodDef };
  safeParse(v: unknown): { success: true; data: unknown } | { success: false; error: { issues: Issue[] } };
  meta?(): Record<string, unknown> | undefined;
}

/** What `strip` and `unwrap` read of a schema's definition: its kind, and per kind its parts. */
interface ZodDef {
  type: string;
  options?: unknown;
  shape?: unknown;
  innerType?: unknown;
  in?: unknown;
  getter?: unknown;
  values?: unknown;
  element?: unknown;
  valueType?: unknown;
  discriminator?: unknown;
}

export interface Issue {
  path: PropertyKey[];
  message: string;
}

const UNION: Zod = EventSchemas;

/** Each event type's schema, keyed by its `type` literal. */
const BY_TYPE = new Map<string, Zod>(
  (UNION._zod.def["options"] as Zod[]).map((o) => [literalOf((o._zod.def["shape"] as Record<string, Zod>)["type"] as Zod) as string, o]),
);

/**
 * The protocol's spelling of a known event type, or undefined. Every later
 * step compares the type with string constants many times over; the
 * constant itself (interned) makes each of those a pointer comparison,
 * where the parsed string would be compared character by character.
 */
export function knownType(type: string): string | undefined {
  return SPELLING.get(type);
}
const SPELLING = new Map([...BY_TYPE.keys()].map((t) => [t, t]));

function unwrap(s: Zod): Zod {
  for (;;) {
    const d = s._zod.def;
    if (d.type === "optional" || d.type === "nullable" || d.type === "default" || d.type === "readonly" || d.type === "catch") s = d["innerType"] as Zod;
    else if (d.type === "pipe") s = d["in"] as Zod;
    else if (d.type === "lazy") s = (d["getter"] as () => Zod)();
    else return s;
  }
}

function literalOf(s: Zod): unknown {
  const d = unwrap(s)._zod.def;
  const values = d["values"];
  return d.type === "literal" && Array.isArray(values) && values.length === 1 ? values[0] : undefined;
}

const DROP = Symbol("drop");

/**
 * The client's `stripAgainst` (src/enforce/strip.ts, MIT), over `_zod.def`:
 * removes what the schema does not describe and records where, and leaves a
 * malformed value on a described field for the parse to reject.
 */
function strip(value: unknown, schema: Zod, path: string, stripped: string[]): unknown {
  const target = unwrap(schema);
  const d = target._zod.def;
  if (d.type === "object") {
    if (!isObject(value)) return value;
    const shape = d["shape"] as Record<string, Zod>;
    const open = target.meta?.()?.["specOpen"] === true;
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const field = Object.prototype.hasOwnProperty.call(shape, key) ? shape[key] : undefined;
      if (field === undefined) {
        if (open) out[key] = value[key];
        else stripped.push(`${path}/${key}`);
        continue;
      }
      const mark = stripped.length;
      const child = strip(value[key], field, `${path}/${key}`, stripped);
      if (child === DROP) {
        stripped.length = mark;
        if (field.safeParse(undefined).success) {
          stripped.push(`${path}/${key}`);
          continue;
        }
        return DROP;
      }
      out[key] = child;
    }
    return out;
  }
  if (d.type === "array") {
    if (!Array.isArray(value)) return value;
    const out: unknown[] = [];
    value.forEach((entry: unknown, i) => {
      const mark = stripped.length;
      const child = strip(entry, d["element"] as Zod, `${path}/${i}`, stripped);
      if (child === DROP) {
        stripped.length = mark;
        stripped.push(`${path}/${i}`);
      } else out.push(child);
    });
    return out;
  }
  if (d.type === "record") {
    if (!isObject(value)) return value;
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const mark = stripped.length;
      const child = strip(value[key], d["valueType"] as Zod, `${path}/${key}`, stripped);
      if (child === DROP) {
        stripped.length = mark;
        stripped.push(`${path}/${key}`);
      } else out[key] = child;
    }
    return out;
  }
  if (d.type === "union") {
    const options = d["options"] as Zod[];
    const disc = d["discriminator"];
    if (typeof disc === "string") {
      if (!isObject(value)) return value;
      for (const option of options) {
        const u = unwrap(option);
        if (u._zod.def.type !== "object") continue;
        if (literalOf((u._zod.def["shape"] as Record<string, Zod>)[disc] as Zod) === value[disc]) return strip(value, option, path, stripped);
      }
      return DROP;
    }
    const objects = options.filter((o) => unwrap(o)._zod.def.type === "object");
    if (objects.length > 1 && isObject(value)) return value;
    for (const option of options) {
      const t = unwrap(option)._zod.def.type;
      if ((t === "array" && Array.isArray(value)) || (t === "object" && isObject(value))) return strip(value, option, path, stripped);
    }
    return value;
  }
  return value;
}

// ------------------------------------------------------------------ fast path

/** Why the schema stage refuses or strips one op of a patch, or undefined when the op passes it. */
export interface OpProblem {
  /** true: the client strips the op (with a warning) and applies the rest; false: the event is fatal. */
  stripped: boolean;
  code: "INVALID_OP" | "INVALID_POINTER";
  /** Which rule the op breaks: what a hint is chosen by (the message is for people). */
  why: "not-an-object" | "no-op" | "unknown-op" | "missing-pointer" | "malformed-pointer" | "missing-value";
  message: string;
}

const OPS = new Set(["add", "remove", "replace", "move", "copy", "test"]);

/** Why a pointer member of op `name` fails the schema, or undefined when it passes. */
function pointerProblem(name: string, k: "path" | "from", p: unknown): OpProblem | undefined {
  if (p === undefined) return { stripped: false, code: "INVALID_OP", why: "missing-pointer", message: `${name}: missing "${k}"` };
  // @ag-ui/core's JsonPointerSchema, /^(\/([^/~]|~[01])*)*$/, accepts exactly the pointers the core parses
  // (test/stream/schema.test.ts holds the two together).
  if (typeof p !== "string" || !isPointer(p)) return { stripped: false, code: "INVALID_POINTER", why: "malformed-pointer", message: `${k} ${JSON.stringify(p).slice(0, 120)} is not an RFC 6901 pointer` };
  return undefined;
}

/** @ag-ui/core's JsonPatchOperationSchema, with the strip step before it, for one op. */
export function opProblem(op: unknown): OpProblem | undefined {
  if (!isObject(op)) return { stripped: false, code: "INVALID_OP", why: "not-an-object", message: "an op must be an object" };
  const name = op["op"];
  if (typeof name !== "string" || !OPS.has(name)) {
    return name === undefined ? { stripped: true, code: "INVALID_OP", why: "no-op", message: 'the op has no "op" member' } : { stripped: true, code: "INVALID_OP", why: "unknown-op", message: `${JSON.stringify(name)} is not an RFC 6902 op` };
  }
  const path = pointerProblem(name, "path", op["path"]);
  if (path !== undefined) return path;
  if (name === "move" || name === "copy") return pointerProblem(name, "from", op["from"]);
  if ((name === "add" || name === "replace" || name === "test") && op["value"] === undefined) return { stripped: false, code: "INVALID_OP", why: "missing-value", message: `${name}: missing "value" (RFC 6902 §4.1; null is a value)` };
  return undefined;
}

/** The members every event may carry (BaseEvent), each checked as its schema does. */
const BASE: Record<string, (v: unknown) => boolean> = {
  type: () => true,
  timestamp: (v) => Number.isSafeInteger(v),
  rawEvent: (v) => v !== null,
  metadata: isObject,
};
const isString = (v: unknown): boolean => typeof v === "string";
function patchOk(v: unknown): boolean {
  if (!Array.isArray(v)) return false;
  // A loop, not every(): this runs for every delta, and a callback would be one more closure each time.
  for (const op of v) if (opProblem(op) !== undefined) return false;
  return true;
}
/** Attributable events (all but the RUN_* ones) may also carry a subagent's id. */
const TAGGED = { subagentRunId: isString };

/**
 * The members of the frequent events, each checked exactly as its schema in
 * @ag-ui/core 1.0.0 checks it, for an answer without running zod: an event
 * whose members are all listed here (or in BASE) and valid parses. Anything
 * else (an optional member not listed, an unknown one the client would strip)
 * goes the slow way, so a "yes" here is always the parse's "yes".
 */
const FAST: Record<string, Record<string, (v: unknown) => boolean>> = {
  TEXT_MESSAGE_START: { ...TAGGED, messageId: isString, role: (v) => v === "assistant" || v === "user" || v === "system" || v === "developer", name: isString },
  TEXT_MESSAGE_CONTENT: { ...TAGGED, messageId: isString, delta: isString },
  TEXT_MESSAGE_END: { ...TAGGED, messageId: isString },
  TOOL_CALL_START: { ...TAGGED, toolCallId: isString, toolCallName: isString, parentMessageId: isString },
  TOOL_CALL_ARGS: { ...TAGGED, toolCallId: isString, delta: isString },
  TOOL_CALL_END: { ...TAGGED, toolCallId: isString },
  REASONING_MESSAGE_CONTENT: { ...TAGGED, messageId: isString, delta: isString },
  STATE_SNAPSHOT: { ...TAGGED, snapshot: (v) => v !== undefined },
  STATE_DELTA: { ...TAGGED, delta: patchOk },
  ACTIVITY_SNAPSHOT: { ...TAGGED, messageId: isString, activityType: isString, content: isObject, replace: (v) => typeof v === "boolean" },
  ACTIVITY_DELTA: { ...TAGGED, messageId: isString, activityType: isString, patch: patchOk },
  STEP_STARTED: { ...TAGGED, stepName: isString },
  STEP_FINISHED: { ...TAGGED, stepName: isString },
  CUSTOM: { ...TAGGED, name: isString, value: (v) => v !== undefined },
  RUN_STARTED: { threadId: isString, runId: isString, protocolVersion: isString, parentRunId: isString },
  RUN_FINISHED: { threadId: isString, runId: isString },
};

/** The members each fast type must have: the others in FAST are optional. */
const REQUIRED: Record<string, readonly string[]> = {
  TEXT_MESSAGE_START: ["messageId"],
  TEXT_MESSAGE_CONTENT: ["messageId", "delta"],
  TEXT_MESSAGE_END: ["messageId"],
  TOOL_CALL_START: ["toolCallId", "toolCallName"],
  TOOL_CALL_ARGS: ["toolCallId", "delta"],
  TOOL_CALL_END: ["toolCallId"],
  REASONING_MESSAGE_CONTENT: ["messageId", "delta"],
  STATE_SNAPSHOT: ["snapshot"],
  STATE_DELTA: ["delta"],
  ACTIVITY_SNAPSHOT: ["messageId", "activityType", "content"],
  ACTIVITY_DELTA: ["messageId", "activityType", "patch"],
  STEP_STARTED: ["stepName"],
  STEP_FINISHED: ["stepName"],
  CUSTOM: ["name", "value"],
  RUN_STARTED: ["threadId", "runId"],
  RUN_FINISHED: ["threadId", "runId"],
};

/** Each fast type's checks, BASE's included, with the number of required members. */
const CHECKS = new Map(
  Object.entries(FAST).map(([type, fields]) => {
    const required = new Set(REQUIRED[type]);
    const checks = new Map<string, { check: (v: unknown) => boolean; required: boolean }>();
    for (const [k, check] of [...Object.entries(BASE), ...Object.entries(fields)]) checks.set(k, { check, required: required.has(k) });
    return [type, { checks, required: required.size }] as const;
  }),
);

/** Whether the schema parses `event` as it is: every member described and valid, every required one there. */
function fastValid(event: Record<string, unknown>, fast: { checks: Map<string, { check: (v: unknown) => boolean; required: boolean }>; required: number }): boolean {
  let required = 0;
  for (const key in event) {
    // A Map: a key such as "constructor" or "__proto__" is no member of a schema.
    const c = fast.checks.get(key);
    if (c === undefined || !c.check(event[key])) return false;
    if (c.required) required++;
  }
  return required === fast.required;
}

/** What the schema stage made of an event of a known type. */
export interface Enforced {
  /** The event as the client goes on with it: stripped and parsed (the input itself when nothing changed). */
  event: Record<string, unknown>;
  /** Where material was stripped, as pointers into the event ("/delta/2"). */
  stripped: readonly string[];
  /** The parse's issues, when it refused the event: fatal. */
  issues?: Issue[];
}

/** Nothing stripped: shared by every event the fast path passes, and never written to. */
const NOTHING_STRIPPED: readonly string[] = Object.freeze([]);

/** Runs the schema stage on an event whose `type` is known (knownType). */
export function enforce(event: Record<string, unknown>): Enforced {
  const type = event["type"] as string;
  const fast = CHECKS.get(type);
  if (fast && fastValid(event, fast)) return { event, stripped: NOTHING_STRIPPED };
  const schema = BY_TYPE.get(type) as Zod;
  const stripped: string[] = [];
  const value = strip(event, schema, "", stripped);
  const parsed = schema.safeParse(value);
  if (!parsed.success) return { event, stripped, issues: parsed.error.issues };
  return { event: parsed.data as Record<string, unknown>, stripped };
}
