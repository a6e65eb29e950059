#!/usr/bin/env node
// Writes the release artifacts to dist/release/, from scratch:
//   agui-state-<version>-<os>-<arch>.tar.gz  the single executable, LICENSE, README.md
//   agui-state-sidecar-<version>.tgz         the npm package (npm pack)
//   agui_state-<version>-py3-none-<platform>.whl
//                                            the Python package with the binary inside it
//                                            (scripts/build-wheel.mjs; needs python3 with
//                                            setuptools and wheel, e.g. Debian's python3-setuptools
//                                            and python3-wheel)
//   SHA256SUMS                               `sha256sum -c` format, written last
//   node scripts/release.mjs [--reuse-build]
//
// Building: by default the build is forced (ensure-built.mjs --force), so the
// artifacts come from the sources as they are, whatever the mtimes say.
// --reuse-build rebuilds only when dist/ is older than its inputs; the release
// tests use it, since vitest's global setup has just built dist/ and a second
// SEA build would only cost time. Either way dist/agui-state and
// dist/agui-state.cjs are replaced by a rename (build.mjs), so tests spawning
// them meanwhile never meet a half-written file; dist/release/ is only ever
// written by this script. `npm pack` runs the package's prepack, which rebuilds
// the bundle alone (build.mjs --bundle-only, well under a second), never the SEA.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = path.join(root, "dist/release");
const binary = path.join(root, "dist/agui-state");
const { name, version } = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
const reuse = process.argv.includes("--reuse-build");
const unknown = process.argv.slice(2).filter((a) => a !== "--reuse-build");
if (unknown.length) {
  console.error(`[release] unknown argument ${unknown[0]}; usage: node scripts/release.mjs [--reuse-build]`);
  process.exit(2);
}

// The SEA is built for the machine it is built on: name the archive after it.
const OS = { linux: "linux", darwin: "darwin", win32: "windows", freebsd: "freebsd" };
const platform = `${OS[process.platform] ?? process.platform}-${process.arch}`;
const binName = `agui-state-${version}-${platform}`;

// A loader hook from the caller (vitest, tsx) must not run in the build or npm.
const env = { ...process.env, NODE_OPTIONS: "" };
const run = (file, args, opts = {}) =>
  execFileSync(file, args, { cwd: root, env, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8", ...opts });

function fail(message) {
  console.error(`[release] FAILED: ${message}`);
  process.exit(1);
}

function size(file) {
  const n = fs.statSync(file).size;
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} kB` : `${(n / 1024 / 1024).toFixed(1)} MB`;
}
const report = (file) => console.error(`[release] ${path.relative(root, file)} (${size(file)})`);

// 1. Build, then check the binary is whole and says the version being released.
try {
  run(process.execPath, [path.join(root, "scripts/ensure-built.mjs"), ...(reuse ? [] : ["--force"])], { stdio: "inherit" });
} catch {
  fail("the build failed");
}
const said = run(binary, ["--version"]).trim();
if (said !== version) fail(`dist/agui-state --version says ${JSON.stringify(said)}, package.json says ${version}`);

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });

// 2. The binary archive: one folder holding the binary, LICENSE and README.md.
const stage = fs.mkdtempSync(path.join(os.tmpdir(), "agui-state-release-"));
try {
  const folder = path.join(stage, binName);
  fs.mkdirSync(folder);
  fs.copyFileSync(binary, path.join(folder, "agui-state"));
  fs.chmodSync(path.join(folder, "agui-state"), 0o755);
  for (const f of ["LICENSE", "README.md"]) fs.copyFileSync(path.join(root, f), path.join(folder, f));
  const archive = path.join(out, `${binName}.tar.gz`);
  // GNU tar: record root as owner rather than whoever ran the release.
  const gnu = /GNU tar/.test(run("tar", ["--version"]));
  const owner = gnu ? ["--owner=0", "--group=0", "--numeric-owner"] : [];
  run("tar", ["-czf", archive, ...owner, "-C", stage, binName]);
  report(archive);
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}

// 3. The npm package, exactly what `npm publish` would upload.
const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", out]));
const tgz = path.join(out, packed[0]?.filename ?? `${name}-${version}.tgz`);
if (!fs.existsSync(tgz)) fail(`npm pack did not write ${path.relative(root, tgz)}`);
report(tgz);

// 4. The Python wheel: the client and the very binary archived above. build-wheel.mjs reads the
// version from package.json and the platform tag from the binary, and says why if it cannot build.
try {
  run(process.execPath, [path.join(root, "scripts/build-wheel.mjs"), "--out", out], { stdio: ["ignore", "ignore", "inherit"] });
} catch {
  fail("the Python wheel did not build (see above)");
}
const wheels = fs.readdirSync(out).filter((f) => f.endsWith(".whl"));
if (wheels.length !== 1) fail(`expected one wheel in ${path.relative(root, out)}, found ${JSON.stringify(wheels)}`);
report(path.join(out, wheels[0]));

// 5. SHA256SUMS over every file in dist/release, whoever wrote it: any
// artifact a later step adds must be written before this one.
const sums = path.join(out, "SHA256SUMS");
const lines = fs
  .readdirSync(out, { withFileTypes: true })
  .filter((e) => e.isFile() && e.name !== "SHA256SUMS")
  .map((e) => e.name)
  .sort()
  .map((f) => `${createHash("sha256").update(fs.readFileSync(path.join(out, f))).digest("hex")}  ${f}\n`);
fs.writeFileSync(sums, lines.join(""));
report(sums);
