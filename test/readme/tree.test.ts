import { mkdirSync } from "node:fs";
import path from "node:path";
import { it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { describeScenario, readerEnv } from "./describe.js";

/**
 * The `tree` scenario: docs/cli.md's blocks, run in an empty folder with the
 * checkout's built dist/ first on PATH (vitest's global setup builds it), as
 * a reader who followed the README's set-up runs them.
 */
describeScenario("tree", it, true, (work) => {
  const cwd = path.join(work, "here");
  mkdirSync(cwd);
  const env = readerEnv(work);
  return { docs: ROOT, cwd, env: { ...env, PATH: `${path.join(ROOT, "dist")}:${env["PATH"] ?? ""}` } };
});
