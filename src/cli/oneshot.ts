import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { diffValue, formatPointer, normalize, parsePointer, stateOverLimit, toWireOp, type Json } from "../core/index.js";
import { parseJson } from "../json/parse.js";
import { scanJson } from "../json/scan.js";
import { DEFAULT_LIMITS, ENVELOPE_DEPTH } from "../protocol/limits.js";
import { UsageError } from "./options.js";

/** Bad input to a one-shot command: a message on stderr and exit status 1. */
export class InputError extends Error {}

export interface Io {
  readStdin(): string;
  out(text: string): void;
}

function readJson(file: string, io: Io, what: string): Json {
  let text: string;
  try {
    text = file === "-" ? io.readStdin() : readFileSync(file, "utf8");
  } catch (e) {
    throw new InputError(`${what}: cannot read ${file}: ${(e as Error).message}`);
  }
  let value: Json;
  try {
    value = parseJson(text) as Json;
  } catch (e) {
    throw new InputError(`${what}: ${file === "-" ? "stdin" : file} is not JSON: ${(e as Error).message}`);
  }
  // The same rules as the sidecar: no silently changed numbers, no unbounded nesting.
  const problem = scanJson(value, DEFAULT_LIMITS.maxDepth + ENVELOPE_DEPTH);
  if (problem?.kind === "unsafe-integer") throw new InputError(`${what}: ${problem.field || "the value"} is an integer beyond ±2^53 that JSON numbers cannot hold exactly`);
  if (problem?.kind === "overflow") throw new InputError(`${what}: ${problem.field || "the value"} is a number beyond the range of a double`);
  if (problem?.kind === "too-deep") throw new InputError(`${what}: nested deeper than ${DEFAULT_LIMITS.maxDepth}`);
  return value;
}

const print = (io: Io, value: unknown): void => io.out(JSON.stringify(value) + "\n");

export function normalizeCommand(argv: string[], io: Io): number {
  const { values, positionals } = args(argv, { state: { type: "string" }, strict: { type: "boolean" } });
  if (positionals.length > 1) throw new UsageError("normalize takes at most one OPS_FILE");
  const ops = readJson(positionals[0] ?? "-", io, "ops");
  if (!Array.isArray(ops)) throw new InputError("ops: expected a JSON array of RFC 6902 ops");
  const state = typeof values["state"] === "string" ? readJson(values["state"], io, "--state") : {};
  const limits = { maxDepth: DEFAULT_LIMITS.maxDepth, maxStateBytes: DEFAULT_LIMITS.maxStateBytes };
  const over = stateOverLimit(state, limits);
  if (over) throw new InputError(`--state: past ${over.limit} ${over.max}`);
  const out = normalize(ops, state, limits);
  print(io, out);
  return values["strict"] && out.skipped.length > 0 ? 1 : 0;
}

export function diffCommand(argv: string[], io: Io): number {
  const { positionals } = args(argv, {});
  if (positionals.length !== 2) throw new UsageError("diff takes two files: OLD.json NEW.json");
  const [a, b] = positionals as [string, string];
  if (a === "-" && b === "-") throw new UsageError("diff: only one of the files can be stdin");
  print(io, diffValue(readJson(a, io, "OLD"), readJson(b, io, "NEW")).map(toWireOp));
  return 0;
}

export function escapeCommand(argv: string[], io: Io): number {
  // Segments are data: "--" and "-x" are segments too, so no flag parsing here.
  print(io, formatPointer(argv));
  return 0;
}

export function parseCommand(argv: string[], io: Io): number {
  if (argv.length !== 1) throw new UsageError("parse takes one POINTER");
  const r = parsePointer(argv[0] as string);
  if (!r.ok) throw new InputError(r.error.message);
  print(io, r.value);
  return 0;
}

function args(argv: string[], options: Record<string, { type: "string" | "boolean" }>) {
  try {
    return parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}
