import { finding, schemaHint, type At, type Finding } from "./findings.js";
import type { Lifecycle } from "./lifecycle.js";
import { enforce, knownType, opProblem, type Issue } from "./schema.js";

/**
 * The stages an event passes in @ag-ui/client 1.0.0 before it is applied:
 * the transport's JSON parse and "is it an event" check, the schema stage
 * (schema.ts), then verifyEvents (lifecycle.ts). Shared by check's model and
 * by fix, so both word their findings alike.
 */

type Ev = Record<string, unknown>;

/** The patch member of a delta event. */
export const PATCH_KEY: Record<string, "delta" | "patch" | undefined> = { STATE_DELTA: "delta", ACTIVITY_DELTA: "patch" };

export type Admission =
  /** The event goes on to be applied: `event` as the client holds it, `raw` as parsed from the input. */
  | { ok: true; raw: Ev; event: Ev; findings: Finding[]; kept: number[] | undefined }
  /** The client drops the event (with a warning) and goes on. */
  | { ok: false; fatal: false; findings: Finding[]; raw?: Ev }
  /** The client's run fails here. */
  | { ok: false; fatal: true; findings: Finding[]; raw?: Ev };

/** No findings: shared, and never written to. */
const NONE: Finding[] = Object.freeze([]) as unknown as Finding[];

const isRecord = (v: unknown): v is Ev => typeof v === "object" && v !== null && !Array.isArray(v);

/** Parses an event's data and checks it as the transport does. */
export function parseEvent(data: string, at: At): { raw: Ev } | { fatal: Finding } {
  let raw: unknown;
  try {
    raw = JSON.parse(data);
  } catch (e) {
    return { fatal: finding(at, "fatal", { code: "INVALID_JSON", message: `the event is not JSON: ${(e as Error).message}` }) };
  }
  if (!isRecord(raw)) return { fatal: finding(at, "fatal", { code: "INVALID_EVENT", message: "the event is not a JSON object" }) };
  const type = raw["type"];
  if (typeof type !== "string" || type === "") return { fatal: finding(at, "fatal", { code: "INVALID_EVENT", message: 'the event has no "type" string' }) };
  at.type = type;
  return { raw };
}

/** The findings of a schema failure: one per op the parse refused, or one for the event. */
function schemaFindings(raw: Ev, issues: Issue[], kept: number[] | undefined, at: At): Finding[] {
  const key = PATCH_KEY[at.type];
  const ops = key ? raw[key] : undefined;
  const seen = new Set<number>();
  const out: Finding[] = [];
  for (const issue of issues) {
    const [member, i] = issue.path;
    if (key !== undefined && member === key && typeof i === "number" && Array.isArray(ops)) {
      const index = kept ? (kept[i] as number) : i;
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

/** A finding about one op the schema stage refused or stripped. */
export function opFinding(at: At, kind: Finding["kind"], op: unknown, index: number, what: string): Finding {
  const problem = opProblem(op) ?? { code: "INVALID_OP" as const, message: "the op does not fit the schema" };
  const path = isRecord(op) && typeof op["path"] === "string" ? op["path"] : undefined;
  const hint = schemaHint(op, problem.message);
  return finding(at, kind, { index, ...(path !== undefined ? { pointer: path } : {}), code: problem.code, message: `${what}: ${problem.message}`, ...(hint ? { hint } : {}) });
}

/**
 * Parse, transport check and schema stage. Lifecycle is left to the caller,
 * which may peek rather than feed (fix, for a delta it may drop).
 */
export function admitSchema(data: string, at: At): Admission {
  const parsed = parseEvent(data, at);
  if ("fatal" in parsed) return { ok: false, fatal: true, findings: [parsed.fatal] };
  const raw = parsed.raw;
  const type = knownType(at.type);
  if (type === undefined) {
    return { ok: false, fatal: false, raw, findings: [finding(at, "dropped", { code: "UNKNOWN_EVENT", message: `the client drops an event of unknown type ${JSON.stringify(at.type)}, with a warning` })] };
  }
  // The same characters, interned: every comparison with a type from here on is a pointer's.
  raw["type"] = at.type = type;
  const enforced = enforce(raw);
  const key = PATCH_KEY[at.type];
  if (enforced.stripped.length === 0 && enforced.issues === undefined) return { ok: true, raw, event: enforced.event, findings: NONE, kept: undefined };
  const findings: Finding[] = [];
  let kept: number[] | undefined;
  if (key !== undefined && enforced.stripped.length > 0) {
    const prefix = `/${key}/`;
    const gone = new Set(enforced.stripped.filter((p) => p.startsWith(prefix)).map((p) => Number(p.slice(prefix.length))));
    const ops = raw[key] as unknown[];
    if (gone.size > 0) {
      kept = [];
      for (let i = 0; i < ops.length; i++) {
        if (gone.has(i)) findings.push(opFinding(at, "dropped", ops[i], i, "the client removes this op, with a warning, and applies the rest"));
        else kept.push(i);
      }
    }
  }
  // The strip step warns before the parse fails: both are reported.
  if (enforced.issues) return { ok: false, fatal: true, raw, findings: [...findings, ...schemaFindings(raw, enforced.issues, kept, at)] };
  return { ok: true, raw, event: enforced.event, findings, kept };
}

/** The lifecycle finding for an event verifyEvents refuses, if it does. */
export function lifecycleFinding(lifecycle: Lifecycle, event: Ev, at: At, peek: boolean): Finding | undefined {
  const broken = peek ? lifecycle.peek(event) : lifecycle.feed(event);
  if (!broken) return undefined;
  const hint = broken.code === "FIRST_EVENT" ? "a stream starts with RUN_STARTED" : broken.code === "AFTER_RUN_FINISHED" || broken.code === "AFTER_RUN_ERROR" ? "send RUN_STARTED to start a new run first" : undefined;
  return finding(at, "fatal", { code: broken.code, message: `verifyEvents fails the run: ${broken.message}`, ...(hint ? { hint } : {}) });
}
