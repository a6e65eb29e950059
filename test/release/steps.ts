import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { ndjson, parseNdjson } from "../../scripts/harness/frames.js";
import { request, responses, resultOf } from "../../scripts/harness/jsonrpc.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { childEnv, type Run } from "../../scripts/harness/process.js";

/** Shared by the release tests: set-up steps, and what every installed agui-state must do. */

/** The child environment without npm_* settings from an enclosing `npm test` (and without any name `also` matches). */
/**
 * The files a wheel's `agui_state/` must hold, sorted: every file of the
 * package's source folder, the `_version.py` the build writes, and with a
 * binary the `bin` folder. Read from the source, so a module added to the
 * package is expected in every wheel without another list to keep.
 */
export function wheelPackageFiles(withBin: boolean): string[] {
  const source = readdirSync(path.join(ROOT, "clients/python/agui_state")).filter((f) => f !== "__pycache__");
  return [...source, "_version.py", ...(withBin ? ["bin"] : [])].sort();
}

export function withoutNpm(also?: RegExp): Record<string, string> {
  const e: Record<string, string> = {};
  for (const [k, v] of Object.entries(childEnv())) if (v !== undefined && !/^npm_/i.test(k) && !also?.test(k)) e[k] = v;
  return e;
}

/**
 * Runs a set-up step to completion, niced: packing and compressing are
 * CPU-heavy, and test files running meanwhile have time limits of their own.
 */
export function setUp(file: string, args: string[], cwd: string, env: Record<string, string>, timeout: number): string {
  const r = spawnSync("nice", ["-n", "10", file, ...args], { cwd, env, encoding: "utf8", timeout, stdio: ["ignore", "pipe", "pipe"] });
  if (r.status !== 0) throw new Error(`${file} ${args.join(" ")} exited ${r.status ?? r.signal}${r.error ? ` (${String(r.error)})` : ""}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** Runs an installed agui-state to completion with `input` on stdin. */
export function runInstalled(bin: string, args: string[], input: string, cwd: string, env: Record<string, string>): Run {
  const r = spawnSync(bin, args, { cwd, env, input, timeout: 30_000 });
  if (r.error) throw r.error;
  return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr.toString("utf8") };
}

/** A small event stream with one delta the client would drop: `check` names it and exits 1. */
const STREAM = [
  'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}',
  'data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/steps","value":[]}]}',
  'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
].map((e) => `${e}\n\n`).join("");

/**
 * What every installed agui-state does, however it was installed: its version, a JSON-RPC request on
 * stdin, and two one-shot commands. `test` is vitest's `it`, or a toolchain's (scripts/harness/toolchain.ts)
 * when the binary needs one to run here.
 */
export function itRunsAsInstalled(run: (args: string[], input: string) => Run, version: string, test: typeof it = it): void {
  test("agui-state --version prints the package version", () => {
    const r = run(["--version"], "");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toBe(`${version}\n`);
  });

  test("answers a JSON-RPC request on stdin and exits 0 when stdin closes", () => {
    const r = run([], ndjson(request(1, "escapePointer", { path: ["toolState", "raster-ops/dataset"] })));
    expect(r.code, r.stderr).toBe(0);
    const [response] = responses(parseNdjson(r.stdout));
    expect(response?.id).toBe(1);
    expect(resultOf(response)).toEqual({ pointer: "/toolState/raster-ops~1dataset" });
  });

  test("runs a one-shot command: agui-state escape toolState a/b", () => {
    const r = run(["escape", "toolState", "a/b"], "");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.toString()).toBe('"/toolState/a~1b"\n');
  });

  test("agui-state check reads a small stream on stdin, names the dropped delta and exits 1", () => {
    const r = run(["check"], STREAM);
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stdout.toString().split("\n").filter(Boolean);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^line 3, .*dropped: op 0 at "\/steps": PATH_NOT_FOUND: /);
    expect(lines[1]).toBe("3 events, 1 delta: 1 dropped, 0 ignored, 0 fatal");
  });
}
