import { diffValue, formatPointer, normalize, parsePointer, toWireOp, type Json, type JsonObject } from "../core/index.js";
import { escapeHidden, showText } from "../json/show.js";
import { stringifyJson } from "../json/stringify.js";
import { DEFAULT_LIMITS } from "../protocol/limits.js";
import { EXIT } from "./exit.js";
import { describeInput, readJsonInput, type InputKind, type InputProblem } from "./json-input.js";
import { parseFlags, UsageError } from "./options.js";

/** What a one-shot command touches of the process: stdin, stdout and stderr. */
export interface Io {
  readStdin(): string;
  out(text: string): void;
  err(text: string): void;
}

/** A number read as `1.0` is written as `1.0` (protocol/README.md §3, Numbers). */
const print = (io: Io, value: unknown): void => io.out(stringifyJson(value) + "\n");

/** Input the command cannot take: one line on stderr, nothing on stdout, exit 2. */
function refuse(io: Io, command: string, problem: InputProblem): number {
  io.err(`agui-state ${command}: ${describeInput(problem)}\n`);
  return EXIT.refused;
}

/** Reads every input first, so that nothing is printed unless all of them are good. */
function readAll(io: Io, inputs: readonly [file: string, kind: InputKind][]) {
  const values = [];
  for (const [file, kind] of inputs) {
    const r = readJsonInput(file, kind, io.readStdin);
    if (!r.ok) return r;
    values.push(r.value);
  }
  return { ok: true as const, values };
}

export function normalizeCommand(argv: string[], io: Io): number {
  const { values, positionals } = parseFlags("normalize", argv, { state: { type: "string" }, strict: { type: "boolean" } });
  if (positionals.length > 1) throw new UsageError("normalize takes at most one OPS_FILE; see agui-state normalize --help");
  const opsFile = positionals[0] ?? "-";
  const stateFile = values["state"];
  if (stateFile === "-" && opsFile === "-") throw new UsageError("normalize: --state and the ops cannot both come from stdin");
  const read = readAll(io, typeof stateFile === "string" ? [[opsFile, "ops"], [stateFile, "state"]] : [[opsFile, "ops"]]);
  if (!read.ok) return refuse(io, "normalize", read.error);
  // readJsonInput gave an array for "ops" and an object for "state".
  const [ops, state = {}] = read.values as [Json[], JsonObject?];
  const out = normalize(ops, state, { maxDepth: DEFAULT_LIMITS.maxDepth, maxStateBytes: DEFAULT_LIMITS.maxStateBytes });
  print(io, out);
  return values["strict"] && out.skipped.length > 0 ? EXIT.problems : EXIT.done;
}

export function diffCommand(argv: string[], io: Io): number {
  const { positionals } = parseFlags("diff", argv, {});
  if (positionals.length !== 2) throw new UsageError("diff takes two files: OLD.json NEW.json");
  const [a, b] = positionals as [string, string];
  if (a === "-" && b === "-") throw new UsageError("diff: only one of the files can be stdin");
  // Both sides are states (protocol/README.md §11): a diff of two arrays or
  // scalars could only be `replace ""`, an op that names the root (§5 rule 7).
  const read = readAll(io, [
    [a, "state"],
    [b, "state"],
  ]);
  if (!read.ok) return refuse(io, "diff", read.error);
  print(io, diffValue(read.values[0] ?? {}, read.values[1] ?? {}).map(toWireOp));
  return EXIT.done;
}

/**
 * No segments at all is a usage error, although the empty path has a pointer
 * (""): `agui-state escape $KEY` with KEY unset would otherwise print the
 * root, the one pointer that names a whole state, which no emitted op may
 * name (protocol/README.md §11). `escape --` asks for the root on purpose.
 * A segment that starts with "-" goes after `--`, as every command reads its
 * flags (options.ts): before it, it is a flag, and escape has none.
 */
export function escapeCommand(argv: string[], io: Io): number {
  if (argv.length === 0) throw new UsageError('escape takes at least one SEGMENT ("escape --" for the root, "")');
  print(io, formatPointer(parseFlags("escape", argv, {}).positionals));
  return EXIT.done;
}

export function parseCommand(argv: string[], io: Io): number {
  const { positionals } = parseFlags("parse", argv, {});
  if (positionals.length !== 1) throw new UsageError("parse takes one POINTER");
  const pointer = positionals[0] as string;
  const r = parsePointer(pointer);
  // A malformed pointer is malformed input: nothing is printed, exit 2, as for a file that is not JSON.
  if (!r.ok) {
    io.err(`agui-state parse: ${showText(pointer, 80)}: ${r.error.code}: ${escapeHidden(r.error.message)}\n`);
    return EXIT.refused;
  }
  print(io, r.value);
  return EXIT.done;
}
