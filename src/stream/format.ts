import type { Summary } from "./client.js";
import type { Finding, Outcome, Reader } from "./findings.js";

/** What fix did, in words: each outcome as it is. */
const DID: Record<Outcome, string> = {
  passed: "sent as it came",
  mended: "sent mended",
  discarded: "not sent",
  kept: "the client's value kept",
};

/**
 * One finding as a line for people (protocol/README.md §13 gives the JSON
 * form). For `check` the kind says what the client does with the event; for
 * `fix` the line also says what fix did with it.
 */
export function formatFinding(f: Finding, reader: Reader = "check"): string {
  const op = f.index !== undefined ? `op ${f.index}${f.pointer !== undefined ? ` at ${JSON.stringify(f.pointer)}` : ""}: ` : "";
  const hint = f.hint !== undefined ? ` Hint: ${f.hint}` : "";
  const stop = /[.!?]$/.test(f.message) ? "" : ".";
  const what = reader === "fix" ? `${f.kind} as sent, ${DID[f.outcome]}` : f.kind;
  return `line ${f.line}, event ${f.event} (${f.type || "no type"}): ${what}: ${op}${f.code}: ${f.message}${stop}${hint}`;
}

/** The last line: what was read, and what the client would do with it (and, for fix, what fix did). */
export function formatSummary(s: Summary, stoppedAt?: number, outcomes?: Readonly<Record<Outcome, number>>): string {
  const counts = `${s.events} event${s.events === 1 ? "" : "s"}, ${s.deltas} delta${s.deltas === 1 ? "" : "s"}`;
  if (s.dropped + s.ignored + s.fatal + s.wiped === 0) return `${counts}: the client applies every one`;
  const stop = stoppedAt !== undefined ? `; the client's run fails at event ${stoppedAt}, and it applies nothing after it` : "";
  const wiped = s.wiped > 0 ? `, ${s.wiped} wiped` : "";
  const did = outcomes ? `; findings ${(Object.keys(DID) as Outcome[]).map((o) => `${outcomes[o]} ${DID[o]}`).join(", ")}` : "";
  return `${counts}: ${s.dropped} dropped, ${s.ignored} ignored, ${s.fatal} fatal${wiped}${stop}${did}`;
}
