import { createReadStream, readFileSync } from "node:fs";
import type { Writable } from "node:stream";
import { parseArgs } from "node:util";
import { isObject, type Json, type JsonObject } from "../core/json.js";
import { StreamChecker } from "../stream/checker.js";
import { formatFinding, formatSummary } from "../stream/format.js";
import { UsageError } from "./options.js";

/**
 * `agui-state check [FILE|-] [--state FILE] [--json]`: replays an AG-UI event
 * stream as @ag-ui/client 1.0.0 would and reports every event it would not
 * apply (protocol/README.md §13). Exit 0: it applies everything; 1: something
 * is dropped, ignored or fatal; 2: a usage error or unreadable input.
 *
 * The helpers here are fix's too: both read a stream, and a `--state`.
 */

/** Input that cannot be read (a missing file, a `--state` that is not a JSON object): exit 2. */
export class Unreadable extends Error {}

export function streamArgs(name: string, argv: string[], flag: string): { file: string; state: JsonObject; flag: boolean } {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { state: { type: "string" }, [flag]: { type: "boolean" } }, strict: true, allowPositionals: true });
  } catch (e) {
    throw new UsageError(`${name}: ${(e as Error).message}`);
  }
  const { values, positionals } = parsed;
  if (positionals.length > 1) throw new UsageError(`${name} takes at most one FILE; see agui-state ${name} --help`);
  const stateFile = values["state"];
  const file = positionals[0] ?? "-";
  if (stateFile === "-" && file === "-") throw new UsageError(`${name}: --state and the stream cannot both come from stdin`);
  return { file, state: typeof stateFile === "string" ? readState(stateFile) : {}, flag: values[flag] === true };
}

/** The state the client holds before the stream: a JSON object (protocol/README.md §11). */
function readState(file: string): JsonObject {
  let value: Json;
  try {
    value = JSON.parse(readFileSync(file === "-" ? 0 : file, "utf8")) as Json;
  } catch (e) {
    throw new Unreadable(`--state: cannot read ${file}: ${(e as Error).message}`);
  }
  if (!isObject(value)) throw new Unreadable(`--state: ${file} is not a JSON object`);
  return value;
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

/** Runs a stream command: reading errors exit 2 with one line on stderr. */
export async function guardedRead(name: string, run: () => Promise<number>): Promise<number> {
  try {
    return await run();
  } catch (e) {
    if (e instanceof UsageError) throw e;
    const message = e instanceof Unreadable ? e.message : `cannot read the input: ${(e as Error).message}`;
    process.stderr.write(`agui-state ${name}: ${message}\n`);
    return 2;
  }
}

export function checkCommand(argv: string[]): Promise<number> {
  return guardedRead("check", async () => {
    const { file, state, flag: json } = streamArgs("check", argv, "json");
    const checker = new StreamChecker(state);
    const out = writer(process.stdout);
    const emit = async (findings: ReturnType<StreamChecker["push"]>): Promise<boolean> => {
      let text = "";
      for (const f of findings) text += (json ? JSON.stringify(f) : formatFinding(f)) + "\n";
      return out(text);
    };
    for await (const chunk of input(file)) if (!(await emit(checker.push(chunk)))) return 1;
    await emit(checker.end());
    const s = checker.summary;
    await out(json ? JSON.stringify({ summary: s }) + "\n" : formatSummary(s, checker.model.stopped?.event) + "\n");
    return s.dropped + s.ignored + s.fatal > 0 ? 1 : 0;
  });
}
