import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { SEA, run } from "../../scripts/harness/process.js";
import type { Answer, Fixture } from "./replay.js";

/** How long the binary may take on one recorded answer (1 MB states among them): a hang guard. */
export const CLI_MS = 60_000;

/** `--own P` for each pointer the fixture owns. */
export const ownFlags = (f: Fixture): string[] => f.own.flatMap((p) => ["--own", p]);

/** A folder for --state files, removed by `done`. */
export function stateFiles(): { write: (state: unknown) => string; done: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-frameworks-"));
  let n = 0;
  return {
    // JSON.stringify of what the client holds: a number is the double the client parsed.
    write: (state) => {
      const file = path.join(dir, `state-${++n}.json`);
      writeFileSync(file, JSON.stringify(state ?? {}));
      return file;
    },
    done: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * The replay upstream's answer through `agui-state fix --state <the request's
 * state> --own ...`, the real binary, at the time of the request: the baseline
 * is what this client sent, as a server-side pipe would have it. A non-zero
 * exit answers 500 with fix's stderr, which the client then fails on.
 */
export function fixAnswer(f: Fixture, files: ReturnType<typeof stateFiles>): Answer {
  return async (recorded, sent) => {
    const r = await run(SEA, ["fix", "--state", files.write(sent.state), ...ownFlags(f)], recorded.body, CLI_MS);
    if (r.code !== 0) return { status: 500, contentType: "text/plain", body: `fix exited ${String(r.code)}: ${r.stderr}` };
    return { status: recorded.status, contentType: recorded.contentType, body: r.stdout };
  };
}

export interface CheckLine {
  code?: string;
  kind?: string;
  pointer?: string;
  event?: number;
  summary?: Record<string, number>;
}

/** `agui-state check --json --state <state> ARGS` over a recorded answer: its exit code and findings. */
export async function check(body: string | Buffer, state: string, args: readonly string[]): Promise<{ code: number | null; findings: CheckLine[]; stderr: string }> {
  const r = await run(SEA, ["check", "--json", "--state", state, ...args], body, CLI_MS);
  const findings = r.stdout
    .toString("utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as CheckLine)
    .filter((l) => l.summary === undefined);
  return { code: r.code, findings, stderr: r.stderr };
}
