import { parseFrames } from "../harness/frames.js";
import { membersOf } from "../harness/jsonrpc.js";
import { BINARY, parseLog, start } from "../harness/process.js";
import { Checker, short } from "./checker.js";
import { buildStream } from "./stream.js";
import type { FuzzStream, StreamOptions } from "./wire.js";

/**
 * Runs fuzz streams against fresh processes (FUZZ_BIN=path fuzzes another
 * build) and checks, after each stream:
 * - the process lived until stdin ended (or SIGTERM), then exited 0, and its
 *   stderr is pino records with nothing logged at error level;
 * - stdout parses completely as frames of the input's framing;
 * - every id of a well-formed request is answered exactly once, no id is
 *   answered that was never sent, and the id-null answers are within bounds;
 * - everything scripts/fuzz/checker.ts checks per response.
 */

export interface StreamReport extends Pick<FuzzStream, "seed" | "framing" | "forced" | "tight" | "sigterm" | "signal" | "messages"> {
  bytes: number;
  frames: number; // frames received
  responses: number;
  answered: number; // distinct ids answered
  certain: number; // ids that had to be answered exactly once
  deltas: number; // deltas replayed on client-side replicas
  compared: number; // getState answers compared with a replica
  outcomes: Map<string, number>; // "applyOps ok", "openRun -32004", …
  faults: string[];
  ms: number;
}

/** Sends one stream to a fresh process and checks every invariant. */
export async function runStream(s: FuzzStream): Promise<StreamReport> {
  const t0 = performance.now();
  const check = new Checker(s);
  const child = start({ name: "agui-state", file: process.env["FUZZ_BIN"] ?? BINARY, args: [] }, s.args, s.env);
  const all = Buffer.concat(s.frames.map((f) => f.bytes));
  const stopAt = s.sigterm > 0 ? Math.floor(all.length * s.sigterm) : Infinity;
  let at = 0;
  for (const n of s.writes) {
    if (child.exited || at >= stopAt) break;
    await child.write(all.subarray(at, (at += n)));
  }
  if (child.exited) check.fault(`the process exited before stdin ended: ${JSON.stringify(child.exited)}; stderr: ${child.stderr.slice(-2000)}`);
  // SIGTERM or SIGINT: it stops reading, answers what it read, and exits 0 with stdin still open.
  // Only once it has answered something: a signal during start-up would meet no handler yet.
  if (s.sigterm > 0) await child.until(() => child.stdout.length > 0, "a first response").then(() => child.kill(s.signal), (e: Error) => check.fault(e.message.slice(0, 2000)));
  else child.end();
  try {
    const exit = await child.waitForExit(120_000);
    if (exit.code !== 0 || exit.signal !== null) check.fault(`the process exited with ${JSON.stringify(exit)} after ${s.sigterm ? s.signal : "stdin ended"}; stderr: ${child.stderr.slice(-2000)}`);
  } catch (e) {
    child.kill();
    check.fault((e as Error).message.slice(0, 2000));
  }
  let frames: unknown[] = [];
  try {
    frames = parseFrames(s.framing, child.stdout);
  } catch (e) {
    check.fault(`stdout is not a clean sequence of frames: ${(e as Error).message}`);
  }
  let responses = 0;
  for (const f of frames) {
    try {
      for (const r of membersOf(f)) {
        responses++;
        check.response(r);
      }
    } catch (e) {
      check.fault((e as Error).message);
    }
  }
  let [certain, min, max] = [0, 0, 0];
  for (const f of s.frames) {
    [min, max] = [min + f.nulls[0], max + f.nulls[1]];
    // After SIGTERM, what was never read is never answered: only "at most once" holds.
    if (!f.certain || s.sigterm > 0) continue;
    for (const c of f.calls.filter((x) => x.id !== undefined && x.id !== null)) {
      const n = check.answered.get(JSON.stringify(c.id)) ?? 0;
      certain++;
      if (n !== 1) check.fault(`id ${JSON.stringify(c.id)} answered ${n} times: ${c.method.slice(0, 40)} in frame ${c.frame} (${f.kind}): ${short(f.bytes.subarray(0, 600).toString("utf8"))}`);
    }
  }
  if ((check.nulls < min && !s.sigterm) || check.nulls > max) check.fault(`${check.nulls} responses with id null, expected ${min}..${max}`);
  try {
    for (const rec of parseLog(child.stderr)) if (rec.level >= 50) check.fault(`logged at error level: ${short(rec, 500)}`);
  } catch (e) {
    check.fault((e as Error).message.slice(0, 500));
  }
  if (check.count > check.faults.length) check.faults.push(`… and ${check.count - check.faults.length} more faults`);
  const { seed, framing, forced, tight, sigterm, signal, messages } = s;
  return { seed, framing, forced, tight, sigterm, signal, messages, bytes: all.length, frames: frames.length, responses, answered: check.answered.size, certain, deltas: check.deltas, compared: check.compared, outcomes: check.outcomes, faults: check.faults, ms: Math.round(performance.now() - t0) };
}

export interface FuzzOptions {
  seed: number;
  streams: number;
  messages: number;
  huge: number;
  log?: (line: string) => void;
}

/**
 * Stream i: seed + i; NDJSON and LSP in turn; framing detected or forced, and
 * default or tight limits, so that streams 0-3 cover both framings and 0-7
 * every combination.
 */
export function streamOptions(o: FuzzOptions, i: number): StreamOptions {
  const forced = ((i >> 1) & 1) === 1;
  const tight = forced !== (((i >> 2) & 1) === 1);
  return { seed: (o.seed + i) | 0, messages: o.messages, framing: i % 2 ? "lsp" : "ndjson", forced, tight, huge: o.huge };
}

export async function fuzz(o: FuzzOptions): Promise<StreamReport[]> {
  const reports: StreamReport[] = [];
  for (let i = 0; i < o.streams; i++) {
    const t0 = performance.now();
    const stream = buildStream(streamOptions(o, i));
    const gen = Math.round(performance.now() - t0);
    const r = await runStream(stream);
    reports.push(r);
    const how = `${r.framing} ${r.forced ? "forced" : "auto"}${r.tight ? ", tight limits" : ""}${r.sigterm ? `, ${r.signal} at ${Math.round(r.sigterm * 100)}%` : ""}`;
    o.log?.(`[fuzz] stream ${i + 1}/${o.streams} seed ${r.seed} ${how}: ${r.messages} messages, ${(r.bytes / 1e6).toFixed(1)} MB, ${r.frames} frames back, ${r.answered} ids answered, ${r.faults.length ? `${r.faults.length} FAULTS` : "ok"} (${gen} ms to generate, ${r.ms} ms to run)`);
  }
  return reports;
}
