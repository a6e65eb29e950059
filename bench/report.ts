import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import path from "node:path";
import type { Stat } from "./lib.js";

/** The bench's table: one row per figure, each a ratio against a reference measured in the same run. */

export interface Row {
  id: string;
  what: string;
  ours: string;
  reference: string;
  ratio: string;
  target: string;
  met: boolean;
}

const rows: Row[] = [];

export const f = (n: number, d = 1): string => n.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
export const range = (s: Stat, d = 1): string => `${f(s.median, d)} (${f(s.min, d)}–${f(s.max, d)})`;

/** Adds a row, and says so on stderr as it goes. */
export function row(r: Row): void {
  rows.push(r);
  process.stderr.write(`${r.id} ${r.what}: ${r.ours} vs ${r.reference} → ${r.ratio} (target ${r.target}) ${r.met ? "met" : "MISSED"}\n`);
}

const notes: string[] = [];

/** A line printed under the table: what a figure's driver cost, and such. */
export function note(text: string): void {
  notes.push(text);
  process.stderr.write(`${text}\n`);
}

/** Prints the table; writes it to `file` too only for a whole run at full size (`why` says why not). */
export function writeTable(file: string, seconds: number, why: "--quick" | "--only" | undefined): void {
  const header = "| # | figure | ours | reference (same run) | ratio | target | |\n|---|---|---|---|---|---|---|\n";
  const table =
    header +
    rows.map((r) => `| ${r.id} | ${r.what} | ${r.ours} | ${r.reference} | ${r.ratio} | ${r.target} | ${r.met ? "met" : "**missed**"} |`).join("\n") +
    "\n" +
    notes.map((n) => `\n${n}\n`).join("");
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
  process.stdout.write(`\n${table}\n${machine}; ${f(seconds, 0)} s${why === undefined ? "" : ` (${why}: not written to ${path.basename(file)})`}\n`);
  if (why === undefined) writeFileSync(file, `# Benchmark results\n\n${machine}. Medians of alternating rounds, with (min–max). Whole run: ${f(seconds, 0)} s.\n\n${table}`);
}
