import type { Summary } from "./client.js";
import { OUTCOMES, hasKind, stopsHere, type Outcome, type Reader, type Reported } from "./findings.js";

/**
 * One finding as a line for people (protocol/README.md §13 gives the JSON
 * form). For `check` the kind says what the client does with the event; for
 * `fix` the line also gives the outcome, the word JSON and logs use
 * (passed, mended, discarded, kept). The op the client stops at is said so
 * when other ops of its delta are named too (`others`; fix always says it).
 */
export function formatFinding(f: Reported, reader: Reader = "check", others = false): string {
  const stop = others && stopsHere(f) ? ", where the client stops" : "";
  const op = f.index !== undefined ? `op ${f.index}${f.pointer !== undefined ? ` at ${JSON.stringify(f.pointer)}` : ""}${stop}: ` : "";
  const hint = f.hint !== undefined ? ` Hint: ${f.hint}` : "";
  const end = /[.!?]$/.test(f.message) ? "" : ".";
  // A finding without a kind is about an op the client would have applied, which fix changed all the same.
  const kind = hasKind(f) ? f.kind : "applies";
  const what = reader === "fix" ? `${kind} as sent, ${f.outcome}` : kind;
  return `line ${f.line}, event ${f.event} (${f.type || "no type"}): ${what}: ${op}${f.code}: ${f.message}${end}${hint}`;
}

/**
 * Findings as lines, one each: an event's findings come out of the pipeline
 * together, so the op the client stops at is said so when its delta has
 * other ops named in the same batch.
 */
export function formatFindings(fs: readonly Reported[], reader: Reader = "check"): string {
  let ops: Map<number, number> | undefined;
  for (const f of fs) if (f.index !== undefined) (ops ??= new Map()).set(f.event, (ops.get(f.event) ?? 0) + 1);
  let text = "";
  for (const f of fs) text += formatFinding(f, reader, (ops?.get(f.event) ?? 0) > 1) + "\n";
  return text;
}

/** The last line: what was read, and what the client would do with it (and, for fix, the findings by outcome). */
export function formatSummary(s: Summary, stoppedAt?: number, outcomes?: Readonly<Record<Outcome, number>>): string {
  const counts = `${s.events} event${s.events === 1 ? "" : "s"}, ${s.deltas} delta${s.deltas === 1 ? "" : "s"}`;
  const did = outcomes ? `; findings by outcome: ${OUTCOMES.map((o) => `${outcomes[o]} ${o}`).join(", ")}` : "";
  if (s.dropped + s.ignored + s.fatal + s.wiped === 0) return `${counts}: the client applies every one${did}`;
  const stop = stoppedAt !== undefined ? `; the client's run fails at event ${stoppedAt}, and it applies nothing after it` : "";
  const wiped = s.wiped > 0 ? `, ${s.wiped} wiped` : "";
  return `${counts}: ${s.dropped} dropped, ${s.ignored} ignored, ${s.fatal} fatal${wiped}${stop}${did}`;
}
