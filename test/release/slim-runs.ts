import { existsSync, mkdtempSync, readdirSync, renameSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect } from "vitest";
import type { Run } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { itRunsAsInstalled, setUp, withoutNpm } from "./steps.js";
import { debootstrap, installInto, slimPackages, slimRoot } from "./slim-root.js";
import type { Release } from "./targets.js";

/**
 * Issue 33, item 4: Node 26's Linux binaries need libatomic.so.1, which a Debian slim image does not
 * ship, so the release vendors it in lib/ beside the binary (scripts/linux-libs.mjs). Here each Linux
 * binary runs, from its archive and from its wheel, in the files of a slim image with nothing added
 * (./slim-root.ts), for arm64 under qemu inside that root; and, with its lib/ folder taken away, is
 * seen not to start there, naming the library: what the vendoring is for.
 */
const PYTHON = "/usr/bin/python3";
const qemu = toolchain("qemu-user-static", ["/usr/bin/qemu-aarch64-static", "--version"]);

type Linux = { target: "linux-x64" | "linux-arm64"; arch: "amd64" | "arm64"; wheelTag: string };
export const LINUX: Linux[] = [
  { target: "linux-x64", arch: "amd64", wheelTag: "x86_64" },
  { target: "linux-arm64", arch: "arm64", wheelTag: "aarch64" },
];

export function describeSlimRuns(rel: Release, t: Linux): void {
  const test = t.arch === "arm64" && !qemu.available ? qemu.test : debootstrap.test;
  describe(`the ${t.target} binary in a Debian slim image's files (debootstrap minbase), nothing added`, () => {
    const folder = `agui-state-${rel.version}-${t.target}`;
    let root = "";
    let at = "";
    beforeAll(() => {
      if (!debootstrap.available || (t.arch === "arm64" && !qemu.available)) return;
      root = slimRoot(t.arch);
      at = mkdtempSync(path.join(rel.work, `slim-${t.target}-`));
      setUp("tar", ["-xzf", path.join(rel.dir, `${folder}.tar.gz`), "-C", at], at, withoutNpm(), 120_000);
      // Installed as pip installs it on such a machine, into a folder (the binary's mode restored).
      const wheel = readdirSync(rel.dir).find((f) => new RegExp(`-manylinux_2_\\d+_${t.wheelTag}\\.whl$`).test(f)) ?? "";
      const pipEnv = { ...withoutNpm(/^(PIP_|PYTHONPATH$|VIRTUAL_ENV$)/i), PIP_CONFIG_FILE: "/dev/null" };
      const pip = ["-m", "pip", "install", "--no-index", "--no-deps", "--no-input", "--disable-pip-version-check", "--only-binary=:all:"];
      setUp(PYTHON, [...pip, "--platform", `manylinux_2_28_${t.wheelTag}`, "--target", path.join(at, "wheel"), path.join(rel.dir, wheel)], at, pipEnv, 300_000);
    }, 900_000);

    /** Runs the binary at `exe` (inside the unpacked folder `from`) in the slim root. */
    const inRoot = (from: () => string, exe: string, name: string) => (args: string[], input: string): Run =>
      installInto(root, from(), name, exe, t.arch)(args, input);

    test("the image has no libatomic: no libatomic1 package, no libatomic.so.1 anywhere in it", () => {
      expect(slimPackages(root)).toContain("libstdc++6");
      expect(slimPackages(root).filter((p) => p.startsWith("libatomic"))).toEqual([]);
      const triplet = t.arch === "arm64" ? "aarch64-linux-gnu" : "x86_64-linux-gnu";
      expect(existsSync(path.join(root, "usr/lib", triplet, "libatomic.so.1"))).toBe(false);
    });

    describe("from the archive", () => {
      itRunsAsInstalled(inRoot(() => path.join(at, folder), "agui-state", `${t.target}-archive`), rel.version, test);
    });
    describe("from the wheel", () => {
      itRunsAsInstalled(inRoot(() => path.join(at, "wheel/agui_state/bin"), "agui-state", `${t.target}-wheel`), rel.version, test);
    });

    test("without its lib/ folder it does not start there: the loader names libatomic.so.1", () => {
      renameSync(path.join(at, folder, "lib"), path.join(at, folder, "lib.away"));
      try {
        const r = inRoot(() => path.join(at, folder), "agui-state", `${t.target}-nolib`)(["--version"], "");
        expect(r.code).toBe(127);
        expect(r.stderr).toMatch(/error while loading shared libraries: libatomic\.so\.1: cannot open shared object file/);
      } finally {
        renameSync(path.join(at, folder, "lib.away"), path.join(at, folder, "lib"));
      }
    });
  });
}
