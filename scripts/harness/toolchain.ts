import { spawnSync } from "node:child_process";
import { it } from "vitest";

/**
 * Whether a client's toolchain is here. Missing locally: the test says so
 * loudly and is reported as skipped, never as passed. Missing under CI=true
 * (where .ci/run installs it): the test fails.
 */
export function toolchain(name: string, probe: string[]): { available: boolean; test: typeof it } {
  const r = spawnSync(probe[0] as string, probe.slice(1), { stdio: "ignore", timeout: 60_000 });
  const available = r.status === 0;
  if (available) return { available, test: it };
  if (process.env["CI"] === "true") {
    const fail = ((title: string) => it(title, () => {
      throw new Error(`${name} toolchain is missing under CI (probe: ${probe.join(" ")}); .ci/run should have installed it`);
    })) as unknown as typeof it;
    return { available, test: fail };
  }
  process.stderr.write(`\n!!! ${name} toolchain not found (probe: ${probe.join(" ")}): its client tests are SKIPPED, not passed. Install it as .ci/run does.\n\n`);
  return { available, test: it.skip as unknown as typeof it };
}

/** Runs a client's test program to completion; `output` is everything it printed, for failure messages. */
export function runProgram(cmd: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; timeout: number }): { status: number | null; stdout: string; output: string } {
  const r = spawnSync(cmd, args, { ...options, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const output = `${r.stdout}\n${r.stderr}${r.signal ? `\n(killed by ${r.signal})` : ""}${r.error ? `\n${String(r.error)}` : ""}`;
  return { status: r.status, stdout: r.stdout, output };
}
