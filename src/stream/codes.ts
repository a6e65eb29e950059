import { SKIP_CODES, type SkipCode } from "../core/index.js";

/**
 * The event codes of protocol/README.md §13: a closed set, as the skip codes
 * of §4 are. A finding's code is one or the other (FindingCode), so a code
 * added anywhere in the stream pipeline must be added here, and then, by the
 * type of every table keyed by it (check's SARIF rules, src/cli/sarif.ts),
 * given its words there too.
 */
export const EVENT_CODES = [
  "INVALID_JSON",
  "SSE_LINE_ENDS",
  "SSE_BUFFER_LIMIT",
  "INVALID_EVENT",
  "UNKNOWN_EVENT",
  "FIRST_EVENT",
  "AFTER_RUN_FINISHED",
  "AFTER_RUN_ERROR",
  "LIFECYCLE",
  "INCOMPLETE_STREAM",
  "UNKNOWN_ACTIVITY",
  "NOT_AN_ACTIVITY",
  "ACTIVITY_ID_CLASH",
  "UNKNOWN_MESSAGE",
  "INHERITED_MEMBER",
  "SNAPSHOT_WIPE",
  "SNAPSHOT_REPLACES_UNKNOWN",
  "UNUSABLE_STATE",
  "REWRITTEN",
  "NOTHING_MOVED",
] as const;
export type EventCode = (typeof EVENT_CODES)[number];

/** What a finding's `code` can be: a skip code (§4) for an op, or an event code (§13). */
export type FindingCode = SkipCode | EventCode;
export const FINDING_CODES: readonly FindingCode[] = [...SKIP_CODES, ...EVENT_CODES];
