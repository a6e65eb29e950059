import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import path from "node:path";
import { describe, expect } from "vitest";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { withoutNpm } from "./steps.js";
import type { Release } from "./targets.js";

/**
 * Which of the release's six wheels pip installs on each kind of machine (issue 33, item 3): a
 * platform wheel only where its binary runs, the pure one everywhere else, musl first. pip's own
 * resolver decides, as `pip install --find-links dist/release agui-state` on that machine would:
 * `--dry-run --report` with `--platform` set to the tags such a machine accepts. pip widens a macOS
 * tag to the older macOS versions itself (macOS 14 accepts `macosx_13_0`), but takes manylinux and
 * musllinux tags only as given, so those lists are spelled out here as packaging's `platform_tags()`
 * gives them on such a machine: every glibc (musl) minor from the machine's own down, then the plain
 * `linux_<arch>` tag.
 */
const PYTHON = "/usr/bin/python3";
const python = toolchain("Python (Debian python3, pip)", [PYTHON, "-m", "pip", "--version"]);

const glibc = (minor: number, arch: string): string[] =>
  [...Array.from({ length: minor - 16 }, (_, i) => `manylinux_2_${minor - i}_${arch}`), `linux_${arch}`];
const musl = (minor: number, arch: string): string[] =>
  [...Array.from({ length: minor + 1 }, (_, i) => `musllinux_1_${minor - i}_${arch}`), `linux_${arch}`];

/** A machine, the platform tags it accepts, and the wheel's platform tag pip must pick there ("any": the pure wheel). */
export const MACHINES: { machine: string; platforms: string[]; picks: RegExp }[] = [
  { machine: "Debian 12 on x86-64 (glibc 2.36)", platforms: glibc(36, "x86_64"), picks: /^manylinux_2_28_x86_64$/ },
  { machine: "Debian 12 on arm64 (glibc 2.36)", platforms: glibc(36, "aarch64"), picks: /^manylinux_2_28_aarch64$/ },
  { machine: "Ubuntu 18.04 on x86-64 (glibc 2.27, below the binary's 2.28)", platforms: glibc(27, "x86_64"), picks: /^any$/ },
  { machine: "Alpine on x86-64 (musl 1.2)", platforms: musl(2, "x86_64"), picks: /^any$/ },
  { machine: "Alpine on arm64 (musl 1.2)", platforms: musl(2, "aarch64"), picks: /^any$/ },
  { machine: "macOS 14 on Apple Silicon", platforms: ["macosx_14_0_arm64"], picks: /^macosx_13_0_arm64$/ },
  { machine: "macOS 14 on Intel", platforms: ["macosx_14_0_x86_64"], picks: /^macosx_13_0_x86_64$/ },
  { machine: "macOS 12 on Apple Silicon (below the binary's 13.5)", platforms: ["macosx_12_0_arm64"], picks: /^any$/ },
  { machine: "macOS 12 on Intel", platforms: ["macosx_12_0_x86_64"], picks: /^any$/ },
  { machine: "Windows on x64", platforms: ["win_amd64"], picks: /^win_amd64$/ },
  { machine: "Windows on arm64 (no binary for it)", platforms: ["win_arm64"], picks: /^any$/ },
];

/** The wheel pip's resolver picks from `dir` for a machine accepting `platforms`, as its file name. */
export function pipPicks(dir: string, platforms: string[], work: string): string {
  const target = mkdtempSync(path.join(work, "pip-choice-"));
  const env = { ...withoutNpm(/^(PIP_|PYTHONPATH$|VIRTUAL_ENV$)/i), PIP_CONFIG_FILE: "/dev/null" };
  const r = spawnSync(PYTHON, ["-m", "pip", "install", "--dry-run", "--quiet", "--report", "-", "--no-index", "--no-deps", "--no-input",
    "--disable-pip-version-check", "--only-binary=:all:", "--python-version", "3.11", ...platforms.flatMap((p) => ["--platform", p]),
    "--target", target, "--find-links", dir, "agui-state"], { env, encoding: "utf8", timeout: 120_000 });
  expect(r.status, r.stderr).toBe(0);
  const report = JSON.parse(r.stdout) as { install: { download_info: { url: string } }[] };
  expect(report.install).toHaveLength(1);
  return path.basename(report.install[0]?.download_info.url ?? "");
}

export function describeWheelChoice(rel: Release): void {
  describe("the wheel pip installs from dist/release on each kind of machine", () => {
    for (const m of MACHINES) {
      python.test(`${m.machine}: ${m.picks.source === "^any$" ? "the pure wheel" : m.picks.source.slice(1, -1)}`, () => {
        const picked = pipPicks(rel.dir, m.platforms, rel.work);
        const tag = new RegExp(`^agui_state-${rel.version.replace(/\./g, "\\.")}-py3-none-(.+)\\.whl$`).exec(picked)?.[1] ?? picked;
        expect(tag).toMatch(m.picks);
      });
    }
  });
}
