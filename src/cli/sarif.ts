import path from "node:path";
import { pathToFileURL } from "node:url";
// Types only (a devDependency), erased from the bundle: the log is checked against SARIF 2.1.0's shape at compile time.
import type { Log, ReportingDescriptor, Result } from "sarif";
import pkg from "../../package.json" with { type: "json" };
import { FINDING_CODES, type FindingCode } from "../stream/codes.js";
import type { Finding, Kind } from "../stream/findings.js";
import { escapeHidden } from "../json/show.js";

/**
 * `check --sarif FILE` (protocol/README.md §13): the findings as a SARIF
 * 2.1.0 log (OASIS, errata 01), the format GitHub code scanning and other CI
 * tools read. One run; each finding is a result whose rule is its code, at
 * the input file and the event's line.
 */

/** A rule's words: a one-line description, and what to do about it. */
interface RuleText {
  short: string;
  help: string;
}

/**
 * Every code a finding can carry, with its words. Keyed by the closed set
 * (src/stream/codes.ts): a code added there without words here fails the
 * typecheck, and test/cli/ci-outputs.test.ts holds the set to the contract's
 * tables (§4, §13).
 */
export const RULES: Record<FindingCode, RuleText> = {
  // §4: an op the client's fast-json-patch refuses, named by the sidecar's skip code.
  INVALID_OP: { short: "An op that is not an RFC 6902 operation", help: "An unknown `op`, or one without `path`, `value` or `from`: the client strips it or refuses the event. The ops are add, remove, replace, move, copy and test; `value` is required for add, replace and test (null is a value)." },
  INVALID_POINTER: { short: "A path that is not an RFC 6901 pointer", help: "A pointer starts with `/` and writes `~` as `~0` and `/` inside a key as `~1`. The client's schema refuses the event, and its run fails." },
  INVALID_INDEX: { short: "An array index that is not one", help: "An array token is `0` or a number without leading zeros, or `-` as the target of add, move or copy. The client drops the whole delta." },
  PATH_NOT_FOUND: { short: "The op's target, or its container, does not exist", help: "remove, replace and test need the member; add needs its container. The client drops the whole delta: add a missing container first, use add for a new member (`fix` does both)." },
  FROM_NOT_FOUND: { short: "The `from` of a move or copy does not exist", help: "The client drops the whole delta. Move or copy from a member the state holds." },
  INDEX_OUT_OF_BOUNDS: { short: "An array index past the end", help: "add takes an index up to the length, other ops one below it. Append with `/-`. The client drops the whole delta." },
  TEST_FAILED: { short: "A test op that does not match", help: "The client drops the whole delta when a test fails. Send tests only for values the client holds, or leave them out." },
  MOVE_INTO_ITSELF: { short: "A move into its own child", help: "A value cannot be moved into itself. The client drops the whole delta." },
  FORBIDDEN_KEY: { short: "A path through __proto__ or constructor/prototype", help: "The client's fast-json-patch refuses these keys and drops the whole delta. Rename the key." },
  LIMIT_EXCEEDED: { short: "An op past a limit", help: "The op would take the state past a size or nesting limit (protocol/README.md §7)." },
  ROOT_NOT_OBJECT: { short: "An op or a STATE_SNAPSHOT that leaves the state something other than an object", help: "AG-UI's state is a JSON object (protocol/README.md §11): do not remove or replace the root with another kind of value, and send a STATE_SNAPSHOT only of an object (`fix` leaves such a snapshot out)." },
  // §13: what the client does with an event.
  INVALID_JSON: { short: "An event whose data is not JSON", help: "The client's run fails at this event. Each SSE `data:` line or NDJSON line must hold one JSON event." },
  SSE_LINE_ENDS: { short: "SSE lines ended with CRLF or CR ran events together", help: "@ag-ui/client 1.0.0 splits events only at two LFs, so a stream whose lines end with CRLF reaches it as one block and the run fails. End SSE lines with LF alone (`fix` writes them so)." },
  SSE_BUFFER_LIMIT: { short: "More than 10 MiB without an event boundary", help: "The client's SSE parser stops at 10 MiB of text without two LFs, and the run fails. Send smaller events, ended with a blank line." },
  INVALID_EVENT: { short: "An event the client's schema refuses", help: "Not an object, no `type`, or a member the schema refuses: the client's run fails at this event." },
  UNKNOWN_EVENT: { short: "An event type the protocol does not define", help: "The client drops the event with a warning. Use one of AG-UI's event types, or CUSTOM." },
  FIRST_EVENT: { short: "The stream does not start with RUN_STARTED", help: "The first event must be RUN_STARTED (or RUN_ERROR): the client's run fails otherwise." },
  AFTER_RUN_FINISHED: { short: "An event after RUN_FINISHED", help: "After RUN_FINISHED only RUN_STARTED or RUN_ERROR may come: the client's run fails." },
  AFTER_RUN_ERROR: { short: "An event after RUN_ERROR", help: "After RUN_ERROR only RUN_STARTED may come: the client's run fails." },
  INCOMPLETE_STREAM: { short: "A run that never ends", help: "The stream stopped inside its run, with no RUN_FINISHED or RUN_ERROR; the client is left with a run that simply stops. fix ends it with RUN_ERROR INCOMPLETE_STREAM after closing what was open." },
  LIFECYCLE: { short: "A break of the run lifecycle", help: "Messages, tool calls, steps, reasoning and subagents must be opened and closed in order; the client's verifyEvents fails the run (the message is the client's own)." },
  UNKNOWN_ACTIVITY: { short: "An ACTIVITY_DELTA for an activity the client does not have", help: "The client skips it without a word. Send an ACTIVITY_SNAPSHOT for the message before its deltas (`fix` drops this one)." },
  NOT_AN_ACTIVITY: { short: "An ACTIVITY_DELTA for a message that is not an activity", help: "The client warns and skips the delta. Patch only activity messages." },
  ACTIVITY_ID_CLASH: { short: "A text or reasoning event with an activity's message id", help: "Message ids are unique across activities and other messages: the client warns and drops the event." },
  UNKNOWN_MESSAGE: { short: "Content or end for a message the client does not hold", help: "The client warns and drops the event. Start the message first." },
  INHERITED_MEMBER: { short: "A patch that reads a member every object inherits", help: "fast-json-patch takes `/constructor` or `/toString` for a member and copies a function into the state, which the client cannot copy: the run fails (state) or the delta is dropped (activity)." },
  SNAPSHOT_WIPE: { short: "A STATE_SNAPSHOT wipes a member the client held", help: "The snapshot removes or replaces a member the client held and no event of the stream set: the client loses it. Send a STATE_DELTA on your own namespace (`fix --own`)." },
  SNAPSHOT_REPLACES_UNKNOWN: { short: "A first STATE_SNAPSHOT replaces whatever the client held", help: "Without --state, what the client keeps for itself is not known, and the first snapshot it applies whole replaces every member this stream did not set. Send a STATE_DELTA on your own namespace (`fix --own`), or give `check --state FILE` to check only what the client holds." },
  REWRITTEN: { short: "An op fix sent as other ops every JSON Patch library applies alike", help: "The client would apply it as sent, but not every RFC 6902 implementation would, or not to the same state: `fix` sends ops that leave no doubt." },
  NOTHING_MOVED: { short: "An op that leaves the state as it is", help: "It changes nothing (§5 rule 8), so `fix` does not send it." },
  UNUSABLE_STATE: { short: "A patch against a state that is no longer JSON", help: "An earlier op left the client holding a cycle or nothing (a move of the root into itself, or of a missing value onto it), so no patch applies any more." },
};

/**
 * The level of a result, from its finding's kind (protocol/README.md §13):
 * the client refuses the event (`fatal`: its run fails; `dropped`: the
 * change is lost) is an error; the client applies or skips it as the protocol
 * says, but not as the server meant (`wiped`: a member it held is lost to a
 * snapshot; `ignored`: a delta skipped without a word), a warning. Each
 * fails `check` all the same (exit 1).
 */
export const LEVEL: Record<Kind, "error" | "warning"> = { fatal: "error", dropped: "error", wiped: "warning", ignored: "warning" };

const SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/**
 * Where the stream came from, as SARIF's artifactLocation: a relative path
 * as a relative URI (each segment percent-encoded), so a code-scanning
 * upload maps it to the repository's file; an absolute one as a file: URI;
 * stdin by a description alone.
 */
export function artifactOf(file: string): { uri?: string; description?: { text: string } } {
  if (file === "-") return { description: { text: "the stream read from standard input" } };
  if (path.isAbsolute(file)) return { uri: pathToFileURL(file).href };
  return { uri: file.split(/[\\/]/).map(encodeURIComponent).join("/") };
}

/** One finding's words for a result: what the client does, the op, the message and the hint, every invisible character escaped. */
export function findingText(f: Finding): string {
  const op = f.index !== undefined ? `op ${f.index}${f.pointer !== undefined ? ` at ${JSON.stringify(f.pointer)}` : ""}: ` : "";
  const hint = f.hint !== undefined ? ` Hint: ${f.hint}` : "";
  return escapeHidden(`event ${f.event} (${f.type || "no type"}): ${f.kind}: ${op}${f.message}${hint}`);
}

/** The SARIF log for a check of `file` that found `findings`, and exited with `exitCode`. */
export function sarifLog(file: string, findings: readonly Finding[], exitCode: number): Log {
  const rules: ReportingDescriptor[] = FINDING_CODES.map((id) => ({
    id,
    shortDescription: { text: RULES[id].short },
    fullDescription: { text: RULES[id].help },
    help: { text: RULES[id].help },
  }));
  const index = new Map(FINDING_CODES.map((id, i) => [id as string, i]));
  const location = artifactOf(file);
  const results: Result[] = findings.map((f) => {
    const properties: Record<string, unknown> = { event: f.event, kind: f.kind, type: f.type, outcome: f.outcome };
    if (f.index !== undefined) properties["index"] = f.index;
    if (f.pointer !== undefined) properties["pointer"] = f.pointer;
    const result: Result = {
      ruleId: f.code,
      level: LEVEL[f.kind],
      message: { text: findingText(f) },
      locations: [{ physicalLocation: { artifactLocation: location, region: { startLine: f.line } } }],
      properties,
    };
    const i = index.get(f.code);
    if (i !== undefined) result.ruleIndex = i;
    return result;
  });
  return {
    $schema: SCHEMA,
    version: "2.1.0",
    runs: [
      {
        tool: { driver: { name: "agui-state", semanticVersion: pkg.version, version: pkg.version, rules } },
        invocations: [{ executionSuccessful: true, exitCode }],
        results,
      },
    ],
  };
}
