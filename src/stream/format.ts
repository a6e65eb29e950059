import type { Summary } from "./checker.js";
import type { Finding } from "./findings.js";

/** One finding as a line for people (protocol/README.md §13 gives the JSON form). */
export function formatFinding(f: Finding): string {
  const op = f.index !== undefined ? `op ${f.index}${f.pointer !== undefined ? ` at ${JSON.stringify(f.pointer)}` : ""}: ` : "";
  const hint = f.hint !== undefined ? ` Hint: ${f.hint}` : "";
  const stop = /[.!?]$/.test(f.message) ? "" : ".";
  return `line ${f.line}, event ${f.event} (${f.type || "no type"}): ${f.kind}: ${op}${f.code}: ${f.message}${stop}${hint}`;
}

/** The last line: what was read, and what the client would do with it. */
export function formatSummary(s: Summary, stoppedAt?: number): string {
  const counts = `${s.events} event${s.events === 1 ? "" : "s"}, ${s.deltas} delta${s.deltas === 1 ? "" : "s"}`;
  if (s.dropped + s.ignored + s.fatal === 0) return `${counts}: the client applies every one`;
  const stop = stoppedAt !== undefined ? `; the client's run fails at event ${stoppedAt}, and it applies nothing after it` : "";
  return `${counts}: ${s.dropped} dropped, ${s.ignored} ignored, ${s.fatal} fatal${stop}`;
}
