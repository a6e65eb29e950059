#!/usr/bin/env node
// Runs scripts/build.mjs only when dist/agui-state or dist/agui-state.cjs is
// missing or older than any input (src/, protocol/, package.json,
// package-lock.json, scripts/build.mjs), by mtime. Exits non-zero if the
// build fails. `--force` always builds.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outputs = ["dist/agui-state", "dist/agui-state.cjs", "dist/resume/index.js"];
const inputs = ["src", "protocol", "package.json", "package-lock.json", "scripts/build.mjs", "scripts/build-resume.mjs"];

// Newest mtime under p (file or directory tree); 0 if p does not exist.
function newest(p) {
  let st;
  try {
    st = fs.statSync(p);
  } catch (err) {
    if (err.code === "ENOENT") return 0;
    throw err;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  // A directory's own mtime counts too: deleting or renaming a file bumps it.
  let max = st.mtimeMs;
  for (const name of fs.readdirSync(p)) max = Math.max(max, newest(path.join(p, name)));
  return max;
}

// Oldest output; missing counts as infinitely old.
function oldest() {
  let min = Infinity;
  for (const o of outputs) {
    try {
      min = Math.min(min, fs.statSync(path.join(root, o)).mtimeMs);
    } catch {
      return -Infinity;
    }
  }
  return min;
}

const force = process.argv.includes("--force");
const built = oldest();
const changed = Math.max(...inputs.map((i) => newest(path.join(root, i))));
if (!force && built >= changed) {
  console.error("[ensure-built] dist/agui-state is up to date");
  process.exit(0);
}
console.error(`[ensure-built] ${force ? "forced" : built === -Infinity ? "output missing" : "inputs changed"}: building`);
const r = spawnSync(process.execPath, [path.join(root, "scripts/build.mjs")], { cwd: root, stdio: "inherit" });
if (r.error) console.error(`[ensure-built] could not run the build: ${r.error.message}`);
process.exit(r.status ?? 1);
