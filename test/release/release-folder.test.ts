import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import type { Run } from "../../scripts/harness/process.js";
import { itRunsAsInstalled, runInstalled, setUp, wheelPackageFiles, withoutNpm } from "./steps.js";
import { describeSlimRuns, LINUX } from "./slim-runs.js";
import { describeForeignTargets, foreignTargets, VENDORED } from "./targets.js";
import { describeWheelChoice } from "./wheel-choice.js";

/**
 * `node scripts/release.mjs` writes dist/release/ from scratch; then the
 * binary archive is unpacked into an empty directory and its binary run with
 * PATH=/nonexistent, so there is no node to fall back on. The Python wheel is
 * checked here for its name and for carrying that same binary; installing it
 * and running both Python clients is test/clients/python-wheel.test.ts. The other targets'
 * binaries and wheels are tested by ./targets.ts, and the wheel pip picks on each kind of machine by
 * ./wheel-choice.ts, both called from here so that one test run writes dist/release/ once. The script runs
 * with --reuse-build: vitest's global setup has just built dist/, and the
 * script rebuilds it only if it is stale (by a rename, as build.mjs always
 * does, so the other test files spawning dist/agui-state are not disturbed).
 */
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { name: string; version: string };
// This machine's target, in the spelling of scripts/sea-targets.mjs (node-<target> on npm).
const folder = `agui-state-${pkg.version}-${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;
const RELEASE = path.join(ROOT, "dist/release");
const ARCHIVE = `${folder}.tar.gz`;
const NPM_TARBALL = `${pkg.name}-${pkg.version}.tgz`;
// py3-none: any Python 3; the platform part is read from the binary (clients/python/setup.py).
const WHEEL = new RegExp(`^agui_state-${pkg.version.replace(/\./g, "\\.")}-py3-none-manylinux_2_\\d+_x86_64\\.whl$`);
const PURE_WHEEL = `agui_state-${pkg.version}-py3-none-any.whl`;
const FOREIGN = foreignTargets(pkg.version);
const SLOW = 600_000;

const work = mkdtempSync(path.join(tmpdir(), "agui-release-"));
const bin = path.join(work, folder, "agui-state");

/** No npm_* settings from an enclosing `npm test` reach the script's `npm pack`. */
const sh = (file: string, args: string[], cwd: string): string => setUp(file, args, cwd, withoutNpm(), SLOW);

/** Runs the unpacked binary in the directory it was unpacked in, with no node on PATH. */
const run = (args: string[], input: string): Run => runInstalled(bin, args, input, work, { ...withoutNpm(), PATH: "/nonexistent" });

beforeAll(() => {
  sh(process.execPath, [path.join(ROOT, "scripts/release.mjs"), "--reuse-build"], ROOT);
  sh("tar", ["-xzf", path.join(RELEASE, ARCHIVE), "-C", work], work);
}, SLOW);

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** This machine's wheel in dist/release. */
function wheel(): string {
  const found = readdirSync(RELEASE).filter((f) => WHEEL.test(f));
  expect(found).toHaveLength(1);
  return found[0] as string;
}

const sha256 = (file: string): string => createHash("sha256").update(readFileSync(file)).digest("hex");

describe("dist/release", () => {
  it("has the five binary archives, the npm tarball, the six Python wheels and SHA256SUMS", () => {
    for (const f of [ARCHIVE, NPM_TARBALL, PURE_WHEEL, "SHA256SUMS", ...FOREIGN.map((t) => t.archive)]) expect(existsSync(path.join(RELEASE, f)), f).toBe(true);
    const wheels = readdirSync(RELEASE).filter((f) => f.endsWith(".whl"));
    const foreignWheels = FOREIGN.map((t) => wheels.find((w) => t.wheel.test(w)) ?? `(none matching ${String(t.wheel)})`);
    expect(readdirSync(RELEASE).sort()).toEqual([ARCHIVE, NPM_TARBALL, "SHA256SUMS", wheel(), PURE_WHEEL, ...FOREIGN.map((t) => t.archive), ...foreignWheels].sort());
  });

  it("the pure wheel carries the clients and no binary", () => {
    const read = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nprint('\\n'.join(sorted(z.namelist())))\n"
      + "print(z.read('agui_state-%s.dist-info/WHEEL' % sys.argv[2]).decode())";
    const out = sh("/usr/bin/python3", ["-c", read, path.join(RELEASE, PURE_WHEEL), pkg.version], work);
    expect(out.split("\n").filter((l) => l.startsWith("agui_state/"))).toEqual(
      wheelPackageFiles(false).map((f) => `agui_state/${f}`));
    expect(out).toContain("Root-Is-Purelib: true");
    expect(out).toContain("Tag: py3-none-any");
  });

  it("the wheel carries the archive's binary, byte for byte, as an executable", () => {
    // Python's zipfile reads the member (83 MB: hashed there rather than piped through spawnSync's buffer).
    const read = "import hashlib, sys, zipfile\n"
      + "info = zipfile.ZipFile(sys.argv[1]).getinfo('agui_state/bin/agui-state')\n"
      + "print(hashlib.sha256(zipfile.ZipFile(sys.argv[1]).read(info)).hexdigest(), oct(info.external_attr >> 16 & 0o777))\n";
    const out = sh("/usr/bin/python3", ["-c", read, path.join(RELEASE, wheel())], work).trim();
    expect(out).toBe(`${sha256(bin)} 0o755`);
  });

  it("SHA256SUMS lists every other file in the folder", () => {
    const listed = readFileSync(path.join(RELEASE, "SHA256SUMS"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => {
        expect(line).toMatch(/^[0-9a-f]{64} {2}\S+$/);
        return line.slice(66);
      });
    const files = readdirSync(RELEASE).filter((f) => f !== "SHA256SUMS");
    expect(listed.sort()).toEqual(files.sort());
  });

  it("sha256sum -c SHA256SUMS passes", () => {
    const out = sh("sha256sum", ["-c", "--strict", "SHA256SUMS"], RELEASE);
    expect(out.split("\n").filter(Boolean)).toEqual(readdirSync(RELEASE).filter((f) => f !== "SHA256SUMS").sort().map((f) => `${f}: OK`));
  });

  it("the archive holds one folder with the binary, LICENSE, README.md and lib/ with libatomic", () => {
    const listed = sh("tar", ["-tzf", path.join(RELEASE, ARCHIVE)], work).split("\n").filter(Boolean).sort();
    expect(listed).toEqual([`${folder}/`, `${folder}/LICENSE`, `${folder}/README.md`, `${folder}/agui-state`, `${folder}/lib/`, ...VENDORED.map((l) => `${folder}/${l}`)].sort());
  });
});

describe("the unpacked binary, with no node on PATH", () => {
  itRunsAsInstalled(run, pkg.version);
});

describeForeignTargets({ dir: RELEASE, work, version: pkg.version, name: pkg.name });

describeWheelChoice({ dir: RELEASE, work, version: pkg.version, name: pkg.name });

for (const linux of LINUX) describeSlimRuns({ dir: RELEASE, work, version: pkg.version, name: pkg.name }, linux);
