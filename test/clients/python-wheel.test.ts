import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { runProgram, toolchain } from "../../scripts/harness/toolchain.js";
import { setUp, wheelPackageFiles, withoutNpm } from "../release/steps.js";

/**
 * The Python platform wheel as a user gets it: scripts/build-wheel.mjs builds
 * it into a temporary folder; `python3 -m venv` makes a plain venv (no
 * system site-packages); its pip installs the wheel alone with --no-index and
 * no pip configuration of this machine's. Then programs run with the venv's
 * python from an empty directory, with PATH holding nothing but the venv's
 * bin/ (so no node) and no AGUI_STATE_BIN, PYTHONPATH or checkout in reach:
 * clients/python/tests/installed_check.py for each client, and the README's
 * two "A run" programs, whose output must be the README's.
 */
const PYTHON = "/usr/bin/python3";
const build = toolchain("Python wheel build (Debian python3-setuptools, python3-wheel, python3-venv)", [PYTHON, "-c", "import setuptools, wheel, ensurepip"]);
const binutils = toolchain("objdump (binutils)", ["objdump", "--version"]);
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { version: string };
const BINARY = path.join(ROOT, "dist/agui-state");
const SLOW = 300_000;

const work = mkdtempSync(path.join(tmpdir(), "agui-wheel-"));
const venv = path.join(work, "venv");
const elsewhere = path.join(work, "elsewhere");
let wheel = "";

/** For pip and venv: no npm_* or PIP_* settings, and no pip configuration file. */
function pipEnv(): Record<string, string> {
  const e = withoutNpm(/^(PIP_|PYTHONPATH$|VIRTUAL_ENV$)/i);
  e["PIP_CONFIG_FILE"] = "/dev/null";
  return e;
}

/** A user's shell with only the venv on PATH: no node, no AGUI_STATE_BIN, nothing of this checkout. */
const userEnv = (): Record<string, string> => ({ PATH: path.join(venv, "bin"), HOME: work, LANG: "C.UTF-8" });

const runHere = (script: string, args: string[] = []) =>
  runProgram(path.join(venv, "bin/python"), [script, ...args], { cwd: elsewhere, env: userEnv(), timeout: 120_000 });

/** The README's fenced block after `<!-- marker -->`. */
function readmeBlock(marker: string): string {
  const readme = readFileSync(path.join(ROOT, "clients/python/README.md"), "utf8");
  const m = new RegExp(`<!-- ${marker.replace(/[()]/g, "\\$&")} -->\\n\`\`\`\\w+\\n([\\s\\S]*?)\`\`\``).exec(readme);
  if (!m?.[1]) throw new Error(`clients/python/README.md has no block marked <!-- ${marker} -->`);
  return m[1];
}

/** Orders dotted versions numerically: 2.9 before 2.28. */
function byVersion(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

const sha256 = (file: string): string => createHash("sha256").update(readFileSync(file)).digest("hex");

beforeAll(() => {
  if (!build.available) return;
  const house = path.join(work, "wheelhouse");
  wheel = setUp(process.execPath, [path.join(ROOT, "scripts/build-wheel.mjs"), "--out", house], ROOT, pipEnv(), SLOW).trim();
  setUp(PYTHON, ["-m", "venv", venv], work, pipEnv(), SLOW);
  setUp(path.join(venv, "bin/pip"), ["install", "--no-index", "--no-input", wheel], work, pipEnv(), SLOW);
  mkdirSync(elsewhere);
  copyFileSync(path.join(ROOT, "clients/python/tests/installed_check.py"), path.join(elsewhere, "installed_check.py"));
  writeFileSync(path.join(elsewhere, "run_sync.py"), readmeBlock("example: run (sync)"));
  writeFileSync(path.join(elsewhere, "run_async.py"), readmeBlock("example: run (asyncio)"));
}, SLOW);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the Python platform wheel", () => {
  build.test("is named agui_state-<package.json version>-py3-none-manylinux_2_<N>_<arch>.whl", () => {
    expect(path.basename(wheel)).toMatch(new RegExp(`^agui_state-${pkg.version.replace(/\./g, "\\.")}-py3-none-manylinux_2_\\d+_x86_64\\.whl$`));
  });

  binutils.test("its glibc level is the newest GLIBC_ version the binary needs, as objdump reads it", () => {
    // An independent reading of the ELF version needs (the build's own is Python, in clients/python/setup.py):
    // the "Version References" of `objdump -p`, one "<hash> <flags> <index> GLIBC_2.28" line per version.
    const r = runProgram("objdump", ["-p", BINARY], { cwd: work, env: withoutNpm(), timeout: 60_000 });
    expect(r.status, r.output).toBe(0);
    const refs = r.stdout.slice(r.stdout.indexOf("Version References:"));
    const glibc = [...refs.matchAll(/ GLIBC_([0-9.]+)$/gm)]
      .map((m) => (m[1] as string).split(".").map(Number))
      .sort(byVersion)
      .at(-1) ?? [];
    expect(glibc[0]).toBe(2);
    expect(path.basename(wheel)).toContain(`-manylinux_2_${glibc[1]}_x86_64.whl`);
  });

  build.test("installs the client, py.typed and the binary (executable, byte for byte dist/agui-state, with its lib/) into the venv", () => {
    const site = readdirSync(path.join(venv, "lib")).map((d) => path.join(venv, "lib", d, "site-packages", "agui_state"));
    const pkgDir = site.find((d) => existsSync(d)) ?? "";
    expect(readdirSync(pkgDir).filter((f) => f !== "__pycache__").sort()).toEqual(wheelPackageFiles(true));
    const bundled = path.join(pkgDir, "bin/agui-state");
    expect(statSync(bundled).mode & 0o777).toBe(0o755);
    expect(sha256(bundled)).toBe(sha256(BINARY));
    // libatomic, which Node 26 needs and a slim image lacks, vendored beside it (scripts/linux-libs.mjs).
    expect(sha256(path.join(pkgDir, "bin/lib/libatomic.so.1"))).toBe(sha256(path.join(ROOT, "dist/lib/libatomic.so.1")));
    expect(readdirSync(path.join(venv, "bin")), "pip installed no node").not.toContain("node");
    const metadata = readFileSync(path.join(path.dirname(pkgDir), `agui_state-${pkg.version}.dist-info/METADATA`), "utf8");
    expect(metadata).toMatch(new RegExp(`^Version: ${pkg.version.replace(/\./g, "\\.")}$`, "m"));
    expect(metadata, "no dependencies").not.toMatch(/^Requires-Dist:/m);
  });

  build.test("the sync client runs from an unrelated directory with no node on PATH", () => {
    const r = runHere("installed_check.py", ["sync", pkg.version]);
    expect(r.status, r.output).toBe(0);
    expect(r.stdout).toBe("installed sync: ok\n");
  });

  build.test("the async client runs from an unrelated directory with no node on PATH", () => {
    const r = runHere("installed_check.py", ["async", pkg.version]);
    expect(r.status, r.output).toBe(0);
    expect(r.stdout).toBe("installed async: ok\n");
  });

  build.test("the README's two runs print what the README says", () => {
    const expected = readmeBlock("output: run");
    for (const script of ["run_sync.py", "run_async.py"]) {
      const r = runHere(script);
      expect(r.status, r.output).toBe(0);
      expect(r.stdout, script).toBe(expected);
    }
  });
});

/**
 * The pure py3-none-any wheel (build-wheel.mjs --pure), for platforms no platform wheel fits: the same
 * clients and no binary. Installed the same way into a venv of its own; the sidecar is then the npm
 * package's `agui-state` (its `bin`, dist/agui-state.cjs, run by the node on PATH), named by
 * AGUI_STATE_BIN, and the clients pass the same scenario. With neither AGUI_STATE_BIN nor an
 * `agui-state` on PATH, the client says where it looked.
 */
describe("the pure Python wheel", () => {
  const pureVenv = path.join(work, "pure-venv");
  const npmBin = path.join(ROOT, "dist/agui-state.cjs");
  // A folder with this node alone: its own folder (/usr/bin, say) may hold an `agui-state`.
  const nodeOnly = path.join(work, "node-only");
  let pureWheel = "";
  const pureEnv = (extra: Record<string, string>): Record<string, string> =>
    ({ PATH: `${path.join(pureVenv, "bin")}:${nodeOnly}`, HOME: work, LANG: "C.UTF-8", ...extra });
  const runPure = (args: string[], extra: Record<string, string>) =>
    runProgram(path.join(pureVenv, "bin/python"), args, { cwd: elsewhere, env: pureEnv(extra), timeout: 120_000 });

  beforeAll(() => {
    if (!build.available) return;
    const house = path.join(work, "pure-wheelhouse");
    pureWheel = setUp(process.execPath, [path.join(ROOT, "scripts/build-wheel.mjs"), "--out", house, "--pure"], ROOT, pipEnv(), SLOW).trim();
    setUp(PYTHON, ["-m", "venv", pureVenv], work, pipEnv(), SLOW);
    setUp(path.join(pureVenv, "bin/pip"), ["install", "--no-index", "--no-input", pureWheel], work, pipEnv(), SLOW);
    mkdirSync(nodeOnly);
    symlinkSync(process.execPath, path.join(nodeOnly, "node"));
  }, SLOW);

  build.test("is named agui_state-<version>-py3-none-any.whl and installs no binary", () => {
    expect(path.basename(pureWheel)).toBe(`agui_state-${pkg.version}-py3-none-any.whl`);
    const site = readdirSync(path.join(pureVenv, "lib")).map((d) => path.join(pureVenv, "lib", d, "site-packages", "agui_state"));
    const pkgDir = site.find((d) => existsSync(d)) ?? "";
    expect(readdirSync(pkgDir).filter((f) => f !== "__pycache__").sort()).toEqual(wheelPackageFiles(false));
  });

  for (const client of ["sync", "async"]) {
    build.test(`the ${client} client passes the platform wheel's scenario with AGUI_STATE_BIN set to the npm package's agui-state`, () => {
      const r = runPure(["installed_check.py", client, pkg.version], { AGUI_STATE_BIN: npmBin });
      expect(r.status, r.output).toBe(0);
      expect(r.stdout).toBe(`installed ${client}: ok\n`);
    });
  }

  build.test("with no AGUI_STATE_BIN and no agui-state on PATH, AguiState() says every place it looked", () => {
    const script = "import agui_state\ntry:\n    agui_state.AguiState()\nexcept FileNotFoundError as e:\n    print(e)\n";
    const r = runPure(["-c", script], {});
    expect(r.status, r.output).toBe(0);
    const said = r.stdout.trim();
    expect(said).toMatch(/^agui-state: no sidecar found\. Looked at: the `path` argument \(not given\), \$AGUI_STATE_BIN \(not set\), the bundled binary \S+agui_state\/bin\/agui-state \(absent: this is the pure wheel/);
    expect(said).toContain("`agui-state` on PATH (none)");
    expect(said).toContain("set AGUI_STATE_BIN");
  });
});
