import type { Json } from "../core/index.js";
import { CLIENT_SSE_LIMIT } from "./events.js";
import type { StreamFinding } from "../protocol/types.js";
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
export const fixes = (reader: Reader, what = "`fix` does this"): string => (reader === "check" ? ` (${what})` : "");

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
