import { createReadStream } from "node:fs";
import type { Writable } from "node:stream";
import type { ParseArgsConfig } from "node:util";
import type { JsonObject } from "../core/json.js";
import { plainNumbers } from "../json/parse.js";
import { EXIT } from "./exit.js";
import { describeInput, readJsonInput, unreadable } from "./json-input.js";
import { parseFlags, UsageError } from "./options.js";

/**
 * What the stream commands, `check` and `fix`, share: their arguments, the
 * stream's bytes, a writer that waits on a full pipe, and the guard that
 * turns input that cannot be read into exit 2. A module of its own, so that
 * check and its CI reports (ci-outputs.ts) each import it and not each other.
 */

/** Input that cannot be read (a missing file, a `--state` that is not a JSON object): exit 2 (exit.ts). */
export class Unreadable extends Error {}

/** A stream command's arguments; `state` is undefined without --state: what the client holds is then not known (§13). */
export function streamArgs(name: string, argv: string[], flag: string, extra: ParseArgsConfig["options"] = {}): { file: string; state: JsonObject | undefined; flag: boolean; values: Record<string, unknown> } {
  const { values, positionals } = parseFlags(name, argv, { ...extra, state: { type: "string" }, [flag]: { type: "boolean" } });
  if (positionals.length > 1) throw new UsageError(`${name} takes at most one FILE; see agui-state ${name} --help`);
  const stateFile = values["state"];
  const file = positionals[0] ?? "-";
  if (stateFile === "-" && file === "-") throw new UsageError(`${name}: --state and the stream cannot both come from stdin`);
  return { file, state: typeof stateFile === "string" ? readState(stateFile) : undefined, flag: values[flag] === true, values };
}

/** The state the client holds before the stream: a JSON object (protocol/README.md §11), read as every command reads JSON. */
function readState(file: string): JsonObject {
  const r = readJsonInput(file, "client-state");
  if (!r.ok) throw new Unreadable(describeInput(r.error));
  // The model is of a JavaScript client, whose JSON.parse reads `1.0` as 1.
  return plainNumbers(r.value) as JsonObject;
}

/** The stream's bytes as they arrive: stdin for "-", else the file. A pipe yields each chunk as soon as it is written. */
export function input(file: string): AsyncIterable<Uint8Array> {
  return file === "-" ? process.stdin : createReadStream(file);
}

/** Writes text, waiting while the stream's buffer is full. Resolves false once the reader has gone (EPIPE). */
export function writer(stream: Writable): (text: string) => Promise<boolean> {
  let gone = false;
  let wake: (() => void) | undefined;
  stream.on("error", () => {
    gone = true;
    wake?.();
  });
  return async (text) => {
    if (gone) return false;
    if (text !== "" && !stream.write(text)) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        stream.once("drain", resolve);
      });
      wake = undefined;
    }
    return !gone;
  };
}

/**
 * Runs a stream command: reading errors exit 2 with one line on stderr. Only
 * those: anything else thrown is a bug of ours, which goes on to the command
 * line's handler (run.ts) and exits 70, not 2 as if the file were unreadable.
 */
export async function guardedRead(name: string, run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (e) {
    if (!(e instanceof Unreadable || isSystemError(e))) throw e;
    // A stream that cannot be opened or read: createReadStream's error carries the file's path.
    const message = e instanceof Unreadable ? e.message : describeInput(unreadable((e as NodeJS.ErrnoException).path ?? "-", e));
    process.stderr.write(`agui-state ${name}: ${message}\n`);
    return EXIT.refused;
  }
}

/** An error from the system (opening or reading a file or stdin: ENOENT, EISDIR, EACCES…), which names its call. */
function isSystemError(e: unknown): e is NodeJS.ErrnoException {
  return e instanceof Error && typeof (e as NodeJS.ErrnoException).syscall === "string" && typeof (e as NodeJS.ErrnoException).code === "string";
}
