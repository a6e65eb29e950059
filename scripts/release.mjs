#!/usr/bin/env node
// Writes the release artifacts to dist/release/, from scratch:
//   agui-state-<version>-<target>.tar.gz     the single executable, LICENSE, README.md, for each
//                                            target of sea-targets.mjs: linux-x64, linux-arm64,
//                                            darwin-x64, darwin-arm64 (the Linux ones with lib/,
//                                            the libraries a Debian slim image lacks: linux-libs.mjs);
//                                            agui-state-<version>-win-x64.zip holds agui-state.exe
//                                            instead
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
// Every binary embeds the Node pinned in sea-targets.mjs (26.10.0), each tarball's integrity checked
// there. The machine's own target is dist/agui-state (with dist/lib/), as built. Every other target's
// binary is that target's official Node from the npm registry (kept in a cache folder) with the same
// bundle written in by `node --build-sea`, without the code cache. Both macOS binaries get an ad-hoc
// signature (scripts/macho/sign.mjs) before they are archived.
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
import { vendorLibraries } from "./linux-libs.mjs";
import { signAdhoc } from "./macho/sign.mjs";
import { buildSea, fetchNode, HOST, NODE_VERSION, pinnedNode, TARGETS, unsignedNode } from "./sea-targets.mjs";

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
  /** target -> its binary; the machine's own is dist/agui-state. A Linux binary has its lib/ beside it. */
  const binaries = new Map([[HOST, binary]]);
  const foreign = Object.keys(TARGETS).filter((t) => t !== HOST);
  let node = "";
  try {
    // The tarballs' integrity is checked against sea-targets.mjs on every use, fetched or cached.
    node = pinnedNode(HOST, env);
    for (const target of foreign) fetchNode(target, env);
  } catch (err) {
    fail(`Node ${NODE_VERSION}: ${err.message}; once fetched, the tarballs are kept in the cache folder (sea-targets.mjs) and the release runs offline`);
  }
  for (const target of foreign) {
    const t = performance.now();
    const { npm, format, exe, triplet } = TARGETS[target];
    const dir = path.join(stage, target);
    fs.mkdirSync(dir);
    const out = buildSea({ node, root, main: "dist/agui-state.cjs", executable: unsignedNode(target, stage, env), output: path.join(dir, exe), useCodeCache: false, env, workDir: stage });
    if (format === "elf") vendorLibraries(out, triplet, path.join(dir, "lib"));
    if (format === "macho") signMachO(out);
    binaries.set(target, out);
    console.error(`[release] ${target}: ${npm}@${NODE_VERSION} with the SEA written in by --build-sea (${Math.round(performance.now() - t)} ms)`);
  }

  // 3. The binary archives: one folder holding the binary, LICENSE and README.md, and for Linux the
  // lib/ folder the binary's RUNPATH names. A .zip for Windows, where it opens without extra tools;
  // a .tar.gz elsewhere, which keeps the mode. GNU tar: record root as owner rather than whoever ran
  // the release.
  const gnu = /GNU tar/.test(run("tar", ["--version"]));
  const owner = gnu ? ["--owner=0", "--group=0", "--numeric-owner"] : [];
  for (const [target, file] of binaries) {
    const binName = `agui-state-${version}-${target}`;
    const { exe, archive: kind } = TARGETS[target];
    const folder = path.join(stage, "archive", binName);
    fs.mkdirSync(folder, { recursive: true });
    fs.copyFileSync(file, path.join(folder, exe));
    fs.chmodSync(path.join(folder, exe), 0o755);
    const lib = path.join(path.dirname(file), "lib");
    if (TARGETS[target].format === "elf" && fs.existsSync(lib)) fs.cpSync(lib, path.join(folder, "lib"), { recursive: true });
    for (const f of ["LICENSE", "README.md"]) fs.copyFileSync(path.join(root, f), path.join(folder, f));
    const archive = path.join(out, `${binName}.${kind}`);
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
 * An arm64 Mach-O without a valid signature is killed by macOS at launch, and --build-sea left none
 * (sea-targets.mjs, removeSignature). An ad-hoc signature needs no certificate: scripts/macho/sign.mjs
 * writes it as Go's linker does, with the binary's name as its identifier. Both macOS binaries get
 * one, x64 too: macOS runs an unsigned x64 binary, but one signed the same way on both CPUs is one
 * thing to verify (test/release/targets.ts checks both with an independent verifier).
 */
function signMachO(file) {
  fs.writeFileSync(file, signAdhoc(fs.readFileSync(file), { identifier: "agui-state" }));
}

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
