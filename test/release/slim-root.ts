import { spawnSync } from "node:child_process";
import { cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import type { Run } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";

/**
 * The files of a Debian slim image, to run the release's Linux binaries in with nothing added. The
 * slim images (debian:<suite>-slim, and python:3.x-slim-<suite> built on them) are debootstrap's
 * minbase variant: the packages of Priority: required, plus apt and its dependencies. Debian's
 * debootstrap makes exactly that set; its first stage (--foreign) downloads the packages from the
 * Debian mirror and unpacks them without running their maintainer scripts, which a program that only
 * loads libraries does not need, and works for a foreign architecture too (arm64 here). The suite is
 * this machine's (/etc/os-release), the mirror Debian's own. Made once per suite and architecture
 * into the cache folder the release keeps its Node tarballs beside, under a temporary name and
 * renamed when whole.
 *
 * A binary runs in it by `unshare --mount --pid --fork --mount-proc --root=<root>`: chroot into the
 * root with a /proc of its own (the dynamic loader reads /proc/self/exe to expand $ORIGIN in a
 * RUNPATH), in a mount namespace that goes away with the process. Needs root, as the release tests
 * run in CI. The arm64 root gets Debian's qemu-aarch64-static copied into it, to run under.
 */
export const debootstrap = toolchain("debootstrap and unshare (Debian), as root", ["sh", "-c", "test \"$(id -u)\" = 0 && command -v debootstrap && command -v unshare"]);

const MIRROR = "http://deb.debian.org/debian";
const QEMU = "/usr/bin/qemu-aarch64-static";

function suite(): string {
  const m = /^VERSION_CODENAME=(\w+)$/m.exec(readFileSync("/etc/os-release", "utf8"));
  if (!m?.[1]) throw new Error("/etc/os-release names no VERSION_CODENAME: not a Debian machine");
  return m[1];
}

function cacheBase(): string {
  if (process.env["AGUI_STATE_NODE_CACHE"]) return path.resolve(process.env["AGUI_STATE_NODE_CACHE"], "..");
  return path.join(process.env["XDG_CACHE_HOME"] || path.join(homedir(), ".cache"), "agui-state");
}

/** Makes a root with debootstrap once, into the cache, under a temporary name renamed when whole. */
function makeRoot(name: string, args: string[], finish: (tmp: string) => void): string {
  const root = path.join(cacheBase(), "slim-root", name);
  if (existsSync(path.join(root, ".complete"))) return root;
  mkdirSync(path.dirname(root), { recursive: true });
  const tmp = mkdtempSync(`${root}.tmp-`);
  try {
    const r = spawnSync("debootstrap", [...args, tmp, MIRROR], { encoding: "utf8", timeout: 1_800_000 });
    if (r.status !== 0) throw new Error(`debootstrap ${args.join(" ")} exited ${r.status ?? r.signal}\n${r.stdout}\n${r.stderr}`);
    // Stage one leaves /proc as a link to the host's; the namespace mounts a fresh one there instead.
    for (const d of ["proc", "opt"]) {
      if (lstatSync(path.join(tmp, d), { throwIfNoEntry: false })?.isSymbolicLink()) rmSync(path.join(tmp, d));
      mkdirSync(path.join(tmp, d), { recursive: true });
    }
    finish(tmp);
    mkdirSync(path.join(tmp, ".complete"));
    rmSync(root, { recursive: true, force: true });
    renameSync(tmp, root);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return root;
}

/** The slim root for `arch`, made on first use: stage one only, the packages unpacked. */
export function slimRoot(arch: "amd64" | "arm64"): string {
  return makeRoot(`${suite()}-${arch}`, ["--foreign", "--variant=minbase", `--arch=${arch}`, suite()], (tmp) => {
    if (arch === "arm64") cpSync(QEMU, path.join(tmp, "usr/bin/qemu-aarch64-static"));
  });
}

/**
 * A Debian 13 (trixie) root with its wine64 (10.0) installed, to run the win-x64 binary in: Debian
 * 12's wine 8.0 cannot start Node 26 at all (V8 reserves its dispatch tables as a subspace of a
 * placeholder reservation, which wine 8.0 refuses: "Fatal process out of memory:
 * SegmentedTable::InitializeTable (subspace allocation)", plain node.exe alike), where 10.0 runs it.
 * A whole debootstrap (both stages, so wine's packages are configured), on any Debian host.
 */
export function wineRoot(): string {
  return makeRoot("trixie-wine-amd64", ["--variant=minbase", "--arch=amd64", "--include=wine64", "trixie"], () => undefined);
}

/** The packages stage one unpacked into `root` (debootstrap writes their names to debootstrap/required and base). */
export function slimPackages(root: string): string[] {
  return ["required", "base"].flatMap((f) => readFileSync(path.join(root, "debootstrap", f), "utf8").split(/\s+/)).filter(Boolean).sort();
}

/**
 * Copies `folder` (an unpacked archive or installed wheel) into `root`/opt/<name>, replacing any
 * copy there, and returns a runner for `exe` (a path inside `folder`) in the root, under qemu for arm64.
 */
export function installInto(root: string, folder: string, name: string, exe: string, arch: "amd64" | "arm64"): (args: string[], input: string) => Run {
  const at = path.join(root, "opt", name);
  rmSync(at, { recursive: true, force: true });
  cpSync(folder, at, { recursive: true });
  const inside = path.posix.join("/opt", name, exe);
  const command = arch === "arm64" ? ["/usr/bin/qemu-aarch64-static", inside] : [inside];
  return (args, input) => {
    const r = spawnSync("unshare", [...inRoot(root), ...command, ...args], { input, env: ROOT_ENV, timeout: 120_000 });
    if (r.error) throw r.error;
    return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr.toString("utf8") };
  };
}

/** unshare's arguments to run a command in `root`: its own mount and pid namespaces, a /proc of its own. */
export const inRoot = (root: string): string[] => ["--mount", "--pid", "--fork", "--mount-proc", `--root=${root}`];

/** The root's own PATH, and nothing of this machine's environment: what runs there needs none. */
export const ROOT_ENV = { PATH: "/usr/bin:/bin", LANG: "C.UTF-8", HOME: "/root" };
