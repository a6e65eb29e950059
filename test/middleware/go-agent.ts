import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { goBuild } from "../../scripts/harness/go.js";

/**
 * The Go middleware's sloppy agent (clients/go/examples/sloppyagent), built once for the test file that
 * calls this, at its top level, into a directory of its own that is removed after the file. Without go,
 * nothing is built: the file's tests are the toolchain's skipped ones.
 */
export function sloppyAgent(prefix: string): { exe: () => string; dir: () => string } {
  let dir = "";
  let exe = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), prefix));
    if (spawnSync("go", ["version"], { stdio: "ignore" }).status === 0) exe = goBuild(path.join(ROOT, "clients/go"), "./examples/sloppyagent", dir);
  }, 620_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return { exe: () => exe, dir: () => dir };
}
