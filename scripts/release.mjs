#!/usr/bin/env node
// Writes the release artifacts to dist/release/, from scratch:
//   agui-state-<version>-<target>.tar.gz     the single executable, LICENSE, README.md, for each
//                                            target of sea-targets.mjs: linux-x64, linux-arm64,
//                                            darwin-x64; agui-state-<version>-win-x64.zip holds
//                                            agui-state.exe instead
//   agui-state-sidecar-<version>.tgz         the npm package (npm pack)
//   agui_state-<version>-py3-none-<platform>.whl
//                                            the Python package with that target's binary inside
//                                            it, one per target (scripts/build-wheel.mjs; needs
//                                            python3 with setuptools and wheel, e.g. Debian's
//                                            python3-setuptools and python3-wheel)
//   agui_state-<version>-py3-none-any.whl    the Python package without a binary
//   SHA256SUMS                               `sha256sum -c` format, written last
//   node scripts/release.mjs [--reuse-build]
//
// The machine's own target is dist/agui-state, as built. Every other target's binary is that
// target's official Node from the npm registry (node-<target> at this node's version, kept in a
// cache folder: sea-targets.mjs) with the same bundle injected, without the code cache.
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
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { buildForeign, fetchNode, foreignBlob, HOST, TARGETS, unpackNode } from "./sea-targets.mjs";

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

const stage = fs.mkdtempSync(path.join(os.tmpdir(), "agui-state-release-"));
// fail() exits at once, past any `finally`: the staged binaries (some 300 MB) go on the way out.
process.on("exit", () => fs.rmSync(stage, { recursive: true, force: true }));
try {
  // 2. The other targets' binaries, in stage/<target>/. Timed: docs/benchmarks.md has the figures.
  const t0 = performance.now();
  /** target -> its binary; the machine's own is dist/agui-state. */
  const binaries = new Map([[HOST, binary]]);
  const foreign = Object.keys(TARGETS).filter((t) => t !== HOST);
  if (foreign.length) {
    const blob = foreignBlob(root, "dist/agui-state.cjs", stage, env);
    for (const target of foreign) {
      const t = performance.now();
      let tarball;
      try {
        tarball = fetchNode(target, process.version.slice(1), env);
      } catch (err) {
        fail(`could not fetch node-${target}@${process.version.slice(1)} from the npm registry (${err.message}); `
          + "once fetched it is kept in the cache folder (sea-targets.mjs) and the release runs offline");
      }
      const dir = path.join(stage, target);
      fs.mkdirSync(dir);
      const node = unpackNode(tarball, target, dir);
      binaries.set(target, await buildForeign(target, node, blob, path.join(dir, TARGETS[target].exe)));
      fs.rmSync(path.join(dir, "package"), { recursive: true, force: true });
      console.error(`[release] ${target}: node-${target}@${process.version.slice(1)} with the SEA blob injected (${Math.round(performance.now() - t)} ms)`);
    }
  }

  // 3. The binary archives: one folder holding the binary, LICENSE and README.md. A .zip for
  // Windows, where it opens without extra tools; a .tar.gz elsewhere, which keeps the mode.
  // GNU tar: record root as owner rather than whoever ran the release.
  const gnu = /GNU tar/.test(run("tar", ["--version"]));
  const owner = gnu ? ["--owner=0", "--group=0", "--numeric-owner"] : [];
  for (const [target, file] of binaries) {
    const binName = `agui-state-${version}-${target}`;
    const exe = TARGETS[target]?.exe ?? "agui-state";
    const folder = path.join(stage, "archive", binName);
    fs.mkdirSync(folder, { recursive: true });
    fs.copyFileSync(file, path.join(folder, exe));
    fs.chmodSync(path.join(folder, exe), 0o755);
    for (const f of ["LICENSE", "README.md"]) fs.copyFileSync(path.join(root, f), path.join(folder, f));
    const archive = path.join(out, `${binName}.${TARGETS[target]?.archive ?? "tar.gz"}`);
    if (archive.endsWith(".zip")) zip(archive, path.join(stage, "archive"), binName);
    else run("tar", ["-czf", archive, ...owner, "-C", path.join(stage, "archive"), binName]);
    fs.rmSync(folder, { recursive: true });
    report(archive);
  }

  // 4. The npm package, exactly what `npm publish` would upload.
  let packed;
  try {
    packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", out]));
  } catch {
    fail("npm pack failed (its prepack rebuilds the bundle: see above)");
  }
  const tgz = path.join(out, packed[0]?.filename ?? `${name}-${version}.tgz`);
  if (!fs.existsSync(tgz)) fail(`npm pack did not write ${path.relative(root, tgz)}`);
  report(tgz);

  // 5. The Python wheels: the client with each binary archived above, and the pure one without.
  // build-wheel.mjs reads the version from package.json and the platform tag from the binary, and
  // says why if it cannot build. The machine's own binary is left to it to find and run.
  const wheelArgs = [...[...binaries].map(([t, f]) => (t === HOST ? [] : ["--binary", f])), ["--pure"]];
  for (const args of wheelArgs) {
    try {
      run(process.execPath, [path.join(root, "scripts/build-wheel.mjs"), "--out", out, ...args], { stdio: ["ignore", "ignore", "inherit"] });
    } catch {
      fail(`the Python wheel (${args.join(" ") || "dist/agui-state"}) did not build (see above)`);
    }
  }
  const wheels = fs.readdirSync(out).filter((f) => f.endsWith(".whl"));
  if (wheels.length !== wheelArgs.length) fail(`expected ${wheelArgs.length} wheels in ${path.relative(root, out)}, found ${JSON.stringify(wheels)}`);
  for (const w of wheels) report(path.join(out, w));
  console.error(`[release] ${binaries.size} targets: binaries, archives and wheels in ${Math.round(performance.now() - t0)} ms`);
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}

// 6. SHA256SUMS over every file in dist/release, whoever wrote it: any
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

/**
 * Writes `folder` (under `cwd`) into a .zip: Python's zipfile, since python3 is needed for the
 * wheels anyway and `zip` is not on every machine. Deflated, entries in sorted order.
 */
function zip(archive, cwd, folder) {
  const script = "import os, sys, zipfile\n"
    + "with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n"
    + "    for d, dirs, files in sorted(os.walk(sys.argv[2])):\n"
    + "        for f in sorted(files):\n"
    + "            z.write(os.path.join(d, f))\n";
  const python = process.env["AGUI_STATE_PYTHON"] || (fs.existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
  run(python, ["-c", script, archive, folder], { cwd });
}
