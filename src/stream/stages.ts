import type { Event as AguiEvent } from "@ag-ui/core";
import { isObject, type JsonObject } from "../core/index.js";
import { TEXT, finding, type At, type Finding } from "./findings.js";
import { schemaHint } from "./patch-verdicts.js";
import type { Lifecycle } from "./lifecycle.js";
import { mendHint } from "./lifecycle-repair.js";
import { enforce, knownType, opProblem, type Issue, type OpProblem } from "./schema.js";

/**
 * The stages an event passes in @ag-ui/client 1.0.0 before it is applied, as
 * its own pipeline orders them (runAgent: the transport's parse, then
 * enforceEvents, then verifyEvents, then defaultApplyEvents):
 * - transport: the data is JSON, an object, with a non-empty string `type`;
 * - enforce: the schema stage (schema.ts): an unknown type is dropped, ops
 *   the schema does not describe are stripped, then the parse may fail the run;
 * - verify: the run lifecycle (lifecycle.ts).
 * Each is a function that returns its decision with its findings; the apply
 * stage is the client model's (client.ts).
 */

/** What a stage decides about an event (or, for `mend`, `keep` and `wipe`, what the apply stage did). */
export type Decision = "pass" | "mend" | "strip" | "drop" | "ignore" | "fatal" | "wipe";

/** The patch member of a delta event. */
export type PatchKey = "delta" | "patch";

export function patchKey(type: string): PatchKey | undefined {
  return type === "STATE_DELTA" ? "delta" : type === "ACTIVITY_DELTA" ? "patch" : undefined;
}

/** The transport's decision: the event's data parsed, or fatal. */
export type Transported = { decision: "pass"; raw: JsonObject; at: At } | { decision: "fatal"; findings: Finding[]; at: At };

/** The transport: event `event` of the stream, whose data starts on `line` of the input. */
export function transport(data: string, event: number, line: number): Transported {
  let raw: unknown;
  try {
    raw = JSON.parse(data);
  } catch (e) {
    const at: At = { event, line, type: "" };
    return { decision: "fatal", at, findings: [finding(at, "fatal", { code: "INVALID_JSON", message: `the event is not JSON: ${(e as Error).message}` })] };
  }
  // JSON.parse's own output: an object is a plain one.
  if (!isObject(raw)) {
    const at: At = { event, line, type: "" };
    return { decision: "fatal", at, findings: [finding(at, "fatal", { code: "INVALID_EVENT", message: "the event is not a JSON object" })] };
  }
  const record = raw;
  const type = record["type"];
  if (typeof type !== "string" || type === "") {
    const at: At = { event, line, type: "" };
    return { decision: "fatal", at, findings: [finding(at, "fatal", { code: "INVALID_EVENT", message: 'the event has no "type" string' })] };
  }
  // A known type's spelling, interned: every comparison with a type from here on is a pointer's.
  const interned = knownType(type) ?? type;
  record["type"] = interned;
  return { decision: "pass", raw: record, at: { event, line, type: interned } };
}

/** The schema stage's decision. `kept` maps each op of the event the client goes on with to its index as sent. */
export type Enforced =
  /** The event goes on as the client parsed it. */
  | { decision: "pass"; event: AguiEvent; findings: readonly Finding[]; kept: undefined }
  /** The client removes some ops (each with a warning) and goes on with the rest. */
  | { decision: "strip"; event: AguiEvent; findings: readonly Finding[]; kept: number[] }
  /** An unknown type: the client drops the event, with a warning. */
  | { decision: "drop"; findings: readonly Finding[] }
  /** The schema refuses the event: the client's run fails. */
  | { decision: "fatal"; findings: readonly Finding[] };

/** No findings: shared, and never written to. */
const NONE: readonly Finding[] = Object.freeze([]);

export function enforceStage(raw: JsonObject, at: At): Enforced {
  if (knownType(at.type) === undefined) return { decision: "drop", findings: [finding(at, "dropped", TEXT.unknownEvent(at.type))] };
  const enforced = enforce(raw);
  // The schema parsed it (or the fast path said it would): the event is one of @ag-ui/core's, decoded once here.
  // A narrowing the parse proves and the compiler cannot see: the schemas are read untyped (schema.ts).
  const event = enforced.event as AguiEvent;
  if (enforced.stripped.length === 0 && enforced.issues === undefined) return { decision: "pass", event, findings: NONE, kept: undefined };
  const key = patchKey(at.type);
  const findings: Finding[] = [];
  let kept: number[] | undefined;
  if (key !== undefined && enforced.stripped.length > 0) {
    const prefix = `/${key}/`;
    const gone = new Set(enforced.stripped.filter((p) => p.startsWith(prefix)).map((p) => Number(p.slice(prefix.length))));
    const ops = raw[key];
    if (gone.size > 0 && Array.isArray(ops)) {
      kept = [];
      for (let i = 0; i < ops.length; i++) {
        if (gone.has(i)) findings.push(opFinding(at, "dropped", ops[i], i, "the client removes this op, with a warning, and applies the rest"));
        else kept.push(i);
      }
    }
  }
  // The strip step warns before the parse fails: both are reported.
  if (enforced.issues) return { decision: "fatal", findings: [...findings, ...schemaFindings(raw, enforced.issues, kept, at)] };
  return kept ? { decision: "strip", event, findings, kept } : { decision: "pass", event, findings, kept: undefined };
}

/** The findings of a schema failure: one per op the parse refused, or one for the event. */
function schemaFindings(raw: JsonObject, issues: Issue[], kept: number[] | undefined, at: At): Finding[] {
  const key = patchKey(at.type);
  const ops = key ? raw[key] : undefined;
  const seen = new Set<number>();
  const out: Finding[] = [];
  for (const issue of issues) {
    const [member, i] = issue.path;
    if (key !== undefined && member === key && typeof i === "number" && Array.isArray(ops)) {
      const index = kept ? (kept[i] ?? i) : i;
      if (seen.has(index)) continue;
      seen.add(index);
      out.push(opFinding(at, "fatal", ops[index], index, "the client's schema refuses the event, and its run fails"));
    }
  }
  if (out.length > 0) return out;
  const first = issues[0] as Issue;
  const where = first.path.length ? `${first.path.map(String).join(".")}: ` : "";
  return [finding(at, "fatal", { code: "INVALID_EVENT", message: `the client's schema refuses the event, and its run fails: ${where}${first.message}` })];
}

const OTHER: OpProblem = { stripped: false, code: "INVALID_OP", why: "malformed-pointer", message: "the op does not fit the schema" };

/** A finding about one op the schema stage refused or stripped. */
function opFinding(at: At, kind: Finding["kind"], op: unknown, index: number, what: string): Finding {
  const problem = opProblem(op) ?? OTHER;
  const path = isObject(op) && typeof op["path"] === "string" ? op["path"] : undefined;
  const hint = schemaHint(op, problem.why);
  return finding(at, kind, { index, ...(path !== undefined ? { pointer: path } : {}), code: problem.code, message: `${what}: ${problem.message}`, ...(hint ? { hint } : {}) });
}

/** A delta's members other than its patch, as the schema parses them, when they pass it: then its bad ops can go and the rest stay. */
export function topLevelShell(raw: JsonObject, key: PatchKey): AguiEvent | undefined {
  const shell = enforce({ ...raw, [key]: [] });
  // No issues: the schema parsed the shell, so it is one of @ag-ui/core's events (as in enforceStage).
  return shell.issues === undefined ? (shell.event as AguiEvent) : undefined;
}

/** verifyEvents' decision: the event goes on, or the run fails on it, with the finding. */
export type Verified = { decision: "pass"; findings: readonly [] } | { decision: "fatal"; findings: readonly [Finding] };

const VERIFIED: Verified = Object.freeze({ decision: "pass", findings: Object.freeze([]) as readonly [] });

/** How the verify stage is run: `feed` moves the lifecycle on; `peek` asks about an event that may never reach the client, and changes nothing. */
export type Verify = "feed" | "peek";

/** verifyEvents on one event that passed the schema stage. */
export function verifyStage(lifecycle: Lifecycle, event: AguiEvent, at: At, how: Verify): Verified {
  const broken = how === "peek" ? lifecycle.peek(event) : lifecycle.feed(event);
  if (!broken) return VERIFIED;
  return { decision: "fatal", findings: [finding(at, "fatal", { code: broken.code, message: `verifyEvents fails the run: ${broken.message}`, hint: mendHint(event.type, broken.code) })] };
}
