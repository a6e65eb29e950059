import { execFileSync } from "node:child_process";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";

/**
 * vitest globalSetup: builds dist/agui-state and dist/agui-state.cjs when any
 * input is newer, so the process tests never run against a stale build. It
 * runs once, before any test file, and fails the run if the build fails.
 */
export default function setup(): void {
  const env = { ...process.env };
  // A loader hook from the caller must not run inside the build or shape the SEA blob.
  delete env["NODE_OPTIONS"];
  execFileSync(process.execPath, [path.join(ROOT, "scripts/ensure-built.mjs")], { cwd: ROOT, env, stdio: "inherit" });
}
