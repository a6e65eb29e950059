#!/usr/bin/env node
// Builds a Python platform wheel, agui_state-<version>-py3-none-<platform>.whl: the client package of
// clients/python/ with a sidecar binary inside it (agui_state/bin/agui-state, or agui-state.exe for a
// Windows binary; a Linux binary with the lib/ folder of vendored libraries found beside it), so that
// `pip install <wheel>` gives a working AguiState() with no Node and no
// AGUI_STATE_BIN. With --pure, the py3-none-any wheel instead: the same clients and no binary, for
// every platform no platform wheel fits; they find the sidecar through AGUI_STATE_BIN or PATH.
//   node scripts/build-wheel.mjs [--out DIR] [--binary FILE | --pure]
// DIR defaults to dist/; FILE to dist/agui-state, which is run (--version) before it is packed. A FILE
// given is packed as it is: it may be built for a platform this machine cannot run (release.mjs).
// Prints the wheel's path on stdout; everything else goes to stderr.
//
// The version is package.json's, the project's one source of it: this script writes it into the staged
// agui_state/_version.py, which pyproject.toml reads (setuptools' `attr:`, without importing anything).
// No copy of it is kept under clients/python/, so it cannot drift. The platform tag is read from the
// binary itself by clients/python/setup.py (its ELF, PE or Mach-O headers), never passed in.
//
// It builds from a staged copy in a temporary folder, so neither the 83 MB binary nor setuptools'
// build/ and *.egg-info ever land in clients/python/. Python: $AGUI_STATE_PYTHON, else Debian's
// /usr/bin/python3 (where python3-setuptools and python3-wheel are), else python3 on PATH. The build
// is offline: no build isolation, no dependencies, no index.
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const source = path.join(root, "clients/python");
const { version } = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));

/** Stops the build; thrown, so that the staged copy (83 MB) is removed on the way out. */
class Failure extends Error {}
function fail(message) {
  throw new Failure(message);
}

const args = process.argv.slice(2);
let out = path.join(root, "dist");
let binary = path.join(root, "dist/agui-state");
let given = false;
let pure = false;
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--out" && args[i + 1]) out = path.resolve(args[++i]);
  else if (args[i] === "--binary" && args[i + 1] && !pure) [binary, given] = [path.resolve(args[++i]), true];
  else if (args[i] === "--pure" && !given) pure = true;
  else {
    console.error("[build-wheel] usage: node scripts/build-wheel.mjs [--out DIR] [--binary FILE | --pure]");
    process.exit(2);
  }
}
// The name the clients look for (clients/python/agui_state/_common.py): Windows runs only a .exe.
const exe = binary.endsWith(".exe") ? "agui-state.exe" : "agui-state";

const python = process.env["AGUI_STATE_PYTHON"] || (fs.existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
// The caller's loader hooks (vitest, tsx) must not reach the binary's --version run. pip must ask
// nothing and read no configuration of this machine's (indexes, find-links, constraints): the build
// needs none, and a wheel built here must not depend on them.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^PIP_/i.test(k)));
Object.assign(env, { NODE_OPTIONS: "", PIP_CONFIG_FILE: os.devNull, PIP_NO_INPUT: "1", PIP_DISABLE_PIP_VERSION_CHECK: "1" });

function isElf(file) {
  const fd = fs.openSync(file, "r");
  try {
    const magic = Buffer.alloc(4);
    fs.readSync(fd, magic, 0, 4, 0);
    return magic.readUInt32BE(0) === 0x7f454c46;
  } finally {
    fs.closeSync(fd);
  }
}

const stage = fs.mkdtempSync(path.join(os.tmpdir(), "agui-state-wheel-"));
try {
  if (!pure && !fs.existsSync(binary)) fail(`${given ? binary : "dist/agui-state"} is missing${given ? "" : ": run `npm run build` first"}`);
  if (!pure && !given) {
    const said = execFileSync(binary, ["--version"], { env, encoding: "utf8" }).trim();
    if (said !== version) fail(`dist/agui-state --version says ${JSON.stringify(said)}, package.json says ${version}`);
  }

  // The package's own files only: no tests, no examples, no caches.
  for (const f of ["pyproject.toml", "setup.py", "README.md"]) fs.copyFileSync(path.join(source, f), path.join(stage, f));
  fs.copyFileSync(path.join(root, "LICENSE"), path.join(stage, "LICENSE"));
  const pkg = path.join(stage, "agui_state");
  fs.mkdirSync(pkg);
  for (const f of fs.readdirSync(path.join(source, "agui_state"))) {
    if (f.endsWith(".py") || f === "py.typed") fs.copyFileSync(path.join(source, "agui_state", f), path.join(pkg, f));
  }
  fs.writeFileSync(path.join(pkg, "_version.py"), `# Written by scripts/build-wheel.mjs from package.json.\n__version__ = ${JSON.stringify(version)}\n`);
  if (!pure) {
    fs.mkdirSync(path.join(pkg, "bin"));
    fs.copyFileSync(binary, path.join(pkg, "bin", exe));
    fs.chmodSync(path.join(pkg, "bin", exe), 0o755); // the wheel records this mode, and pip restores it
    // A Linux binary's vendored libraries (scripts/linux-libs.mjs), found through its RUNPATH of
    // $ORIGIN/lib: the same folder beside it in the wheel as in the archive.
    const lib = path.join(path.dirname(binary), "lib");
    if (isElf(binary) && fs.existsSync(lib)) fs.cpSync(lib, path.join(pkg, "bin", "lib"), { recursive: true });
  }

  // Into a folder of its own first, so that exactly one wheel is found whatever `out` already holds.
  const house = path.join(stage, "wheelhouse");
  const pip = ["-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "--no-cache-dir", "--wheel-dir", house, stage];
  const r = spawnSync(python, pip, { cwd: stage, env, stdio: ["ignore", 2, "inherit"] });
  if (r.error) fail(`could not run ${python}: ${r.error.message} (set AGUI_STATE_PYTHON to a python3 with setuptools and wheel)`);
  if (r.status !== 0) fail(`${python} ${pip.join(" ")} exited ${r.status ?? r.signal} (it needs setuptools and wheel: Debian's python3-setuptools, python3-wheel)`);
  const built = fs.readdirSync(house);
  const expected = `agui_state-${version}-py3-none-${pure ? "any" : "<platform>"}.whl`;
  const ok = pure ? (f) => f.endsWith("-any.whl") : (f) => !f.endsWith("-any.whl");
  if (built.length !== 1 || !built[0]?.startsWith(`agui_state-${version}-py3-none-`) || !ok(built[0])) fail(`expected one ${expected}, pip wrote ${JSON.stringify(built)}`);
  fs.mkdirSync(out, { recursive: true });
  fs.copyFileSync(path.join(house, built[0]), path.join(out, built[0]));
  const wheel = path.join(out, built[0]);
  const shown = path.relative(root, wheel).startsWith("..") ? wheel : path.relative(root, wheel);
  console.error(`[build-wheel] ${shown} (${(fs.statSync(wheel).size / 1024 / 1024).toFixed(1)} MB)`);
  process.stdout.write(`${wheel}\n`);
} catch (err) {
  if (!(err instanceof Failure)) throw err;
  console.error(`[build-wheel] FAILED: ${err.message}`);
  process.exitCode = 1;
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
