import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { ndjson, parseNdjson } from "../../scripts/harness/frames.js";
import { request, responses, resultOf } from "../../scripts/harness/jsonrpc.js";
import type { Run } from "../../scripts/harness/process.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { ELF_AARCH64, MACHO_ARM64, MACHO_X86_64, PE_AMD64, readExe, readSeaBlob, SEA_USE_CODE_CACHE, type Exe } from "./exe-format.js";
import { debootstrap, inRoot, ROOT_ENV, wineRoot } from "./slim-root.js";
import { itRunsAsInstalled, runInstalled, setUp, wheelPackageFiles, withoutNpm } from "./steps.js";

/**
 * The release's binaries for the targets other than this machine's (linux-x64), as far as this
 * machine can run them, called by release-folder.test.ts once dist/release/ is written (one release
 * per test run: two would write the same folder). linux-arm64 runs under qemu-user-static, from its
 * archive and from its wheel (and in a Debian slim image's files: ./slim-runs.ts); win-x64 runs under
 * Debian 13's wine64 in a root of its own (./slim-root.ts), with stdin and stdout on files (libuv's
 * Windows pipes do not open on the pipes wine hands over: EBADF); darwin-x64 and darwin-arm64 cannot run here at all, so they are read: format,
 * CPU, injected blob, minimum macOS and signature. Every target's blob holds the bundle of the
 * linux-x64 binary of the same release, byte for byte, without the code cache (made by this machine's
 * Node 26, it would only be rejected by theirs).
 */
const PYTHON = "/usr/bin/python3";
const QEMU = "/usr/bin/qemu-aarch64-static";
const WINE = "/usr/lib/wine/wine64"; // inside the wine root
const SEA_FUSE_ON = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2:1";
/** The Mach-O signature verifier, independent of the signer (another language, its own reading of the headers). */
const VERIFY = path.join(ROOT, "test/release/macho_verify.py");

const qemu = toolchain("qemu-user-static with arm64 libc6 and libstdc++6 (multiarch)", ["sh", "-c", `${QEMU} --version && test -f /usr/lib/aarch64-linux-gnu/libstdc++.so.6`]);
/** Node 26's minimum macOS, as its darwin binaries' LC_BUILD_VERSION say (both the same). */
const MACOS_MIN: [number, number] = [13, 5];
// wine runs in a Debian 13 root made by debootstrap (./slim-root.ts, wineRoot: why not Debian 12's).
const wine = debootstrap;
const python = toolchain("Python (Debian python3)", [PYTHON, "--version"]);

const sha256 = (file: string): string => createHash("sha256").update(readFileSync(file)).digest("hex");

/** Unpacks a .zip (Python's zipfile: `unzip` is not on every machine) or a .tar.gz into `into`. */
function unpack(archive: string, into: string): void {
  mkdirSync(into, { recursive: true });
  if (archive.endsWith(".tar.gz")) setUp("tar", ["-xzf", archive, "-C", into], into, withoutNpm(), 120_000);
  else setUp(PYTHON, ["-m", "zipfile", "-e", archive, into], into, withoutNpm(), 120_000);
}

/** The members of a .zip or .tar.gz, sorted, without directory entries. */
function members(archive: string, cwd: string): string[] {
  const out = archive.endsWith(".tar.gz")
    ? setUp("tar", ["-tzf", archive], cwd, withoutNpm(), 120_000)
    : setUp(PYTHON, ["-c", "import sys, zipfile\nprint('\\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))", archive], cwd, withoutNpm(), 120_000);
  return out.split("\n").filter((l) => l && !l.endsWith("/")).sort();
}

/** A wheel's WHEEL metadata, as "Key: value" lines. */
function wheelMeta(wheel: string, cwd: string): string {
  const read = "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nprint(z.read(next(n for n in z.namelist() if n.endswith('.dist-info/WHEEL'))).decode())";
  return setUp(PYTHON, ["-c", read, wheel], cwd, withoutNpm(), 120_000);
}

export type Release = { dir: string; work: string; version: string; name: string };

/** What one foreign target's files must be: its archive, its wheel, the binary's name and format. */
type Target = { target: string; archive: string; wheel: RegExp; exe: string; format: Exe["format"]; machine: number; lib: string[] };

/** The libraries a Linux archive vendors in lib/ (scripts/linux-libs.mjs), each with its copyright file. */
export const VENDORED = ["lib/libatomic.so.1", "lib/libatomic.so.1.copyright"];

export function foreignTargets(version: string): Target[] {
  const v = version.replace(/\./g, "\\.");
  return [
    { target: "linux-arm64", archive: `agui-state-${version}-linux-arm64.tar.gz`, wheel: new RegExp(`^agui_state-${v}-py3-none-manylinux_2_(\\d+)_aarch64\\.whl$`), exe: "agui-state", format: "elf", machine: ELF_AARCH64, lib: VENDORED },
    { target: "win-x64", archive: `agui-state-${version}-win-x64.zip`, wheel: new RegExp(`^agui_state-${v}-py3-none-win_amd64\\.whl$`), exe: "agui-state.exe", format: "pe", machine: PE_AMD64, lib: [] },
    { target: "darwin-x64", archive: `agui-state-${version}-darwin-x64.tar.gz`, wheel: new RegExp(`^agui_state-${v}-py3-none-macosx_(\\d+)_(\\d+)_x86_64\\.whl$`), exe: "agui-state", format: "macho", machine: MACHO_X86_64, lib: [] },
    { target: "darwin-arm64", archive: `agui-state-${version}-darwin-arm64.tar.gz`, wheel: new RegExp(`^agui_state-${v}-py3-none-macosx_(\\d+)_(\\d+)_arm64\\.whl$`), exe: "agui-state", format: "macho", machine: MACHO_ARM64, lib: [] },
  ];
}

export function describeForeignTargets(rel: Release): void {
  for (const t of foreignTargets(rel.version)) {
    describe(`the ${t.target} release`, () => {
      const target = t;
      let at = "";
      let wheel = "";
      let bundle = "";
      let hostSettings: [number, number] = [-1, -1];
      /** The binary from the archive, and the same from the wheel. */
      const fromArchive = (): string => path.join(at, "archive", `agui-state-${rel.version}-${t.target}`, t.exe);
      const fromWheel = (): string => path.join(at, "wheel", "agui_state", "bin", t.exe);

      beforeAll(() => {
        const r = rel;
        at = mkdtempSync(path.join(r.work, `${t.target}-`));
        wheel = readdirSync(r.dir).find((f) => target.wheel.test(f)) ?? "";
        unpack(path.join(r.dir, target.archive), path.join(at, "archive"));
        if (wheel) unpack(path.join(r.dir, wheel), path.join(at, "wheel"));
        // The bundle in this machine's binary of the same release (whose blob also has a code cache),
        // as release-folder.test.ts unpacked it into the work folder.
        const exe = readExe(readFileSync(path.join(r.work, `agui-state-${r.version}-linux-x64`, "agui-state")));
        const blob = typeof exe === "string" || !exe.blob ? "" : readSeaBlob(exe.blob);
        bundle = typeof blob === "string" ? "" : blob.main;
        if (typeof blob !== "string") hostSettings = blob.settings;
      }, 300_000);

      python.test(`the archive holds one folder with the binary, LICENSE and README.md${t.lib.length ? ", and lib/ with libatomic" : ""}`, () => {
        const folder = `agui-state-${rel.version}-${t.target}`;
        expect(members(path.join(rel.dir, target.archive), at)).toEqual([`${folder}/LICENSE`, `${folder}/README.md`, `${folder}/${t.exe}`, ...t.lib.map((l) => `${folder}/${l}`)].sort());
      });

      python.test(`the binary is ${t.format} for its CPU, with this release's bundle injected as the SEA blob, without code cache`, () => {
        const buf = readFileSync(fromArchive());
        const exe = readExe(buf);
        if (typeof exe === "string") throw new Error(exe);
        expect([exe.format, exe.machine]).toEqual([t.format, t.machine]);
        expect(exe.blob, "no NODE_SEA_BLOB where node looks for it").toBeDefined();
        const blob = readSeaBlob(exe.blob as Buffer);
        if (typeof blob === "string") throw new Error(blob);
        expect(blob.flags & SEA_USE_CODE_CACHE).toBe(0);
        expect(blob.codePath).toBe("dist/agui-state.cjs");
        expect(bundle.length, "the linux-x64 binary's blob was read").toBeGreaterThan(0);
        expect(blob.main === bundle, "the blob's main script is the linux-x64 binary's, byte for byte").toBe(true);
        expect(blob.settings, "the blob's settings are the linux-x64 binary's").toEqual(hostSettings);
        expect(buf.includes(SEA_FUSE_ON), "--build-sea flipped the SEA fuse").toBe(true);
        // The Windows binary ships unsigned; the macOS ones carry an ad-hoc signature, checked below.
        if (t.format === "pe") expect(exe.signed, "the vendor's signature was removed, not left to sign other bytes").toBe(false);
      });

      python.test("the wheel carries the archive's binary, byte for byte, as an executable, under the right tag", () => {
        expect(wheel, `a wheel matching ${String(target.wheel)}`).not.toBe("");
        expect(sha256(fromWheel())).toBe(sha256(fromArchive()));
        const meta = wheelMeta(path.join(rel.dir, wheel), at);
        expect(meta).toContain("Root-Is-Purelib: false");
        expect(meta).toContain(`Tag: ${wheel.split("-").slice(2).join("-").replace(/\.whl$/, "")}`);
        const files = readdirSync(path.join(at, "wheel", "agui_state")).sort();
        expect(files).toEqual(wheelPackageFiles(true));
        const bin = readdirSync(path.join(at, "wheel", "agui_state", "bin"), { recursive: true }).map(String).sort();
        expect(bin).toEqual([t.exe, ...(t.lib.length ? ["lib", ...t.lib] : [])].sort());
        for (const l of t.lib) expect(sha256(path.join(at, "wheel", "agui_state", "bin", l)), l).toBe(sha256(path.join(path.dirname(fromArchive()), l)));
        const mode = setUp(PYTHON, ["-c", `import sys, zipfile\nprint(oct(zipfile.ZipFile(sys.argv[1]).getinfo('agui_state/bin/${t.exe}').external_attr >> 16 & 0o777))`, path.join(rel.dir, wheel)], at, withoutNpm(), 60_000);
        expect(mode.trim()).toBe("0o755");
      });

      if (t.format === "elf") {
        python.test("the wheel's glibc level is the newest GLIBC_ version the binary or its vendored libraries need, as readelf reads it", () => {
          const minors = [fromArchive(), ...t.lib.filter((l) => l.endsWith(".so.1")).map((l) => path.join(path.dirname(fromArchive()), l))].flatMap((f) => {
            const r = spawnSync("readelf", ["-V", "--wide", f], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
            expect(r.status, r.stderr).toBe(0);
            return [...r.stdout.matchAll(/Name: GLIBC_2\.(\d+)\b/g)].map((m) => Number(m[1]));
          });
          expect(Number(target.wheel.exec(wheel)?.[1])).toBe(Math.max(...minors));
        });

        python.test("the binary finds its vendored libraries in lib/ beside it: RUNPATH $ORIGIN/lib", () => {
          const r = spawnSync("readelf", ["-d", "--wide", fromArchive()], { encoding: "utf8" });
          expect(r.stdout).toMatch(/\(RUNPATH\)\s+Library runpath: \[\$ORIGIN\/lib\]/);
          expect(r.stdout).toContain("Shared library: [libatomic.so.1]");
        });
      }
      if (t.format === "macho") {
        python.test("the binary carries an ad-hoc signature that an independent verifier accepts: every page hash recomputed, the CodeDirectory checked", () => {
          const exe = readExe(readFileSync(fromArchive()));
          if (typeof exe === "string") throw new Error(exe);
          expect(exe.signed, "LC_CODE_SIGNATURE").toBe(true);
          const r = spawnSync(PYTHON, [VERIFY, fromArchive()], { encoding: "utf8" });
          const verdict = JSON.parse(r.stdout) as { ok: boolean; error?: string; identifier?: string; flags?: number; execSegFlags?: number; pages?: number; codeLimit?: number };
          expect(verdict.error).toBeUndefined();
          expect(r.status).toBe(0);
          // adhoc | linker-signed, as Go's linker signs; the main executable's __TEXT is the executable segment.
          expect(verdict).toMatchObject({ ok: true, identifier: "agui-state", flags: 0x20002, execSegFlags: 1 });
          expect(verdict.pages).toBe(Math.ceil((verdict.codeLimit ?? 0) / 4096));
        });

        python.test(`the binary wants macOS ${MACOS_MIN.join(".")} (LC_BUILD_VERSION), and the wheel says ${MACOS_MIN[0]}_0, as pip spells macOS 11 and later`, () => {
          const exe = readExe(readFileSync(fromArchive()));
          if (typeof exe === "string") throw new Error(exe);
          expect(exe.minOs).toEqual(MACOS_MIN);
          const m = target.wheel.exec(wheel);
          expect([Number(m?.[1]), Number(m?.[2])]).toEqual([MACOS_MIN[0], 0]);
        });
      }
    });
  }

  describe("the linux-arm64 binary under qemu-user-static, with no node on PATH", () => {
    const folder = path.join(rel.work, "arm64");
    const under = (bin: string) => (args: string[], input: string): Run =>
      runInstalled(QEMU, [bin, ...args], input, folder, { ...withoutNpm(), PATH: "/nonexistent" });
    beforeAll(() => {
      if (!qemu.available) return;
      const r = rel;
      unpack(path.join(r.dir, `agui-state-${r.version}-linux-arm64.tar.gz`), folder);
      // Installed as pip installs it on an arm64 machine (which restores the binary's mode), into a folder.
      const wheel = readdirSync(r.dir).find((f) => f.endsWith("_aarch64.whl")) ?? "";
      const pipEnv = { ...withoutNpm(/^(PIP_|PYTHONPATH$|VIRTUAL_ENV$)/i), PIP_CONFIG_FILE: "/dev/null" };
      const pip = ["-m", "pip", "install", "--no-index", "--no-deps", "--no-input", "--disable-pip-version-check", "--only-binary=:all:"];
      setUp(PYTHON, [...pip, "--platform", "manylinux_2_28_aarch64", "--target", path.join(folder, "wheel"), path.join(r.dir, wheel)], folder, pipEnv, 300_000);
    }, 300_000);
    describe("from the archive", () => {
      itRunsAsInstalled(under(path.join(folder, `agui-state-${rel.version}-linux-arm64/agui-state`)), rel.version, qemu.test);
    });
    describe("from the wheel", () => {
      itRunsAsInstalled(under(path.join(folder, "wheel/agui_state/bin/agui-state")), rel.version, qemu.test);
    });
  });

  describe("the win-x64 binary under wine64 (Debian 13's wine 10.0, in a root of its own)", () => {
    const prefix = `/opt/wine-prefix-${process.pid}`;
    let root = "";
    let exe = "";
    beforeAll(() => {
      if (!wine.available) return;
      const r = rel;
      root = wineRoot();
      const at = path.join(root, "opt", `win-${process.pid}`);
      unpack(path.join(r.dir, `agui-state-${r.version}-win-x64.zip`), at);
      exe = path.posix.join("/opt", `win-${process.pid}`, `agui-state-${r.version}-win-x64`, "agui-state.exe");
      // Node 26 refuses Windows older than 10 ("Node.js is only supported on Windows 10, Windows Server
      // 2016, or higher."), and a new prefix says Windows 7.
      setUp("unshare", [...inRoot(root), WINE, "winecfg", "-v", "win10"], r.work, wineEnv(prefix), 600_000);
    }, 1_800_000);
    afterAll(() => {
      // The wineserver went with each run's pid namespace; the copies and the prefix go now.
      if (root) for (const d of [`win-${process.pid}`, path.basename(prefix)]) rmSync(path.join(root, "opt", d), { recursive: true, force: true });
    });

    /** Runs agui-state.exe in the root with stdin read from a file and stdout written to one. */
    function runWine(args: string[], input: string): { code: number | null; stdout: string; stderr: string } {
      const dir = mkdtempSync(path.join(rel.work, "wine-run-"));
      writeFileSync(path.join(dir, "in"), input);
      const fds = [openSync(path.join(dir, "in"), "r"), openSync(path.join(dir, "out"), "w"), openSync(path.join(dir, "err"), "w")];
      try {
        const r = spawnSync("unshare", [...inRoot(root), WINE, exe, ...args], { env: wineEnv(prefix), stdio: fds, timeout: 120_000 });
        return { code: r.status, stdout: readFileSync(path.join(dir, "out"), "utf8"), stderr: readFileSync(path.join(dir, "err"), "utf8") };
      } finally {
        for (const fd of fds) closeSync(fd);
      }
    }

    wine.test("agui-state.exe --version prints the package version", () => {
      const r = runWine(["--version"], "");
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toBe(`${rel.version}\n`);
    });

    wine.test("answers JSON-RPC requests read from stdin and exits 0 at its end", () => {
      const r = runWine([], ndjson(request(1, "escapePointer", { path: ["toolState", "raster-ops/dataset"] }), request(2, "stats", {})));
      expect(r.code, r.stderr).toBe(0);
      const [first, second] = responses(parseNdjson(Buffer.from(r.stdout)));
      expect(resultOf(first)).toEqual({ pointer: "/toolState/raster-ops~1dataset" });
      expect((resultOf(second) as { version?: string }).version).toBe(rel.version);
    });
  });
}

const wineEnv = (prefix: string): Record<string, string> => ({ ...ROOT_ENV, WINEPREFIX: prefix, WINEDEBUG: "-all" });

