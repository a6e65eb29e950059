// The single executable for targets other than the machine's own (scripts/release.mjs uses it):
// the target's official Node binary, from the npm registry package node-<target> at the version of
// the Node running this script, with the same kind of SEA blob as scripts/build.mjs injects, minus
// the code cache. Offline after the first fetch: the packages are kept in a cache folder
// ($AGUI_STATE_NODE_CACHE, else $XDG_CACHE_HOME/agui-state/node, else ~/.cache/agui-state/node),
// never in node_modules, so `npm ci` stays small.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

/** The targets a release builds; `exe` is the binary's name inside the archive and the wheel. */
export const TARGETS = {
  "linux-x64": { format: "elf", exe: "agui-state", archive: "tar.gz" },
  "linux-arm64": { format: "elf", exe: "agui-state", archive: "tar.gz" },
  "win-x64": { format: "pe", exe: "agui-state.exe", archive: "zip" },
  "darwin-x64": { format: "macho", exe: "agui-state", archive: "tar.gz" },
};

/** This machine's target name, in the npm packages' spelling (node-<target>). */
export const HOST = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}`;

// Fixed by Node: the string postject flips so node knows a blob is injected.
export const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

export function cacheDir() {
  if (process.env["AGUI_STATE_NODE_CACHE"]) return path.resolve(process.env["AGUI_STATE_NODE_CACHE"]);
  const base = process.env["XDG_CACHE_HOME"] || path.join(os.homedir(), ".cache");
  return path.join(base, "agui-state", "node");
}

/**
 * The npm package node-<target>@<version> as a tarball in the cache, fetched by `npm pack` (which
 * checks the registry's integrity hash) when it is not there yet. Written under a temporary name and
 * renamed, so an interrupted fetch never leaves a truncated tarball to be trusted next time.
 */
export function fetchNode(target, version, env) {
  const dir = cacheDir();
  const file = path.join(dir, `node-${target}-${version}.tgz`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(dir, ".fetch-"));
  try {
    const spec = `node-${target}@${version}`;
    const packed = JSON.parse(execFileSync("npm", ["pack", spec, "--json", "--pack-destination", tmp], { cwd: tmp, env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
    const name = packed[0]?.filename;
    if (!name || !fs.existsSync(path.join(tmp, name))) throw new Error(`npm pack ${spec} wrote no tarball`);
    fs.renameSync(path.join(tmp, name), file);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return file;
}

/** Unpacks the node binary (package/bin/node or node.exe) of a node-<target> tarball into `into`. */
export function unpackNode(tarball, target, into) {
  const member = `package/bin/${target.startsWith("win-") ? "node.exe" : "node"}`;
  execFileSync("tar", ["-xzf", tarball, "-C", into, member], { stdio: ["ignore", "ignore", "inherit"] });
  const file = path.join(into, member);
  if (!fs.existsSync(file)) throw new Error(`${path.basename(tarball)} holds no ${member}`);
  return file;
}

/**
 * The SEA blob of `bundle` (a path relative to `root`) for foreign targets. Node's SEA docs: the code cache is specific to the
 * platform and version of the node that makes it, so it is left out (useCodeCache: false) and the
 * target's V8 compiles the script at startup; the rest of the blob is the same on every platform.
 */
export function foreignBlob(root, bundle, workDir, env) {
  const config = path.join(workDir, "sea-config.json");
  const output = path.join(workDir, "sea-prep.blob");
  // `main` relative to root, as build.mjs has it: the blob records the path, and a path of the
  // machine that built the release has no place in it.
  fs.writeFileSync(config, JSON.stringify({ main: bundle, output, disableExperimentalSEAWarning: true, useCodeCache: false }));
  execFileSync(process.execPath, ["--experimental-sea-config", config], { cwd: root, env, stdio: "pipe" });
  return fs.readFileSync(output);
}

/**
 * Node's SEA docs remove the vendor's signature before injecting (`codesign --remove-signature` on
 * macOS, `signtool remove /s` on Windows): the injection changes the signed bytes, so the signature
 * would only be a wrong one. Neither tool runs here. Left to itself, postject (LIEF) drops a Mach-O's
 * LC_CODE_SIGNATURE with the warning "The signature seems corrupted!", but keeps a PE's certificate
 * table, which then signs bytes the file no longer has. Both are cut here, as those tools do, so the
 * binaries are plainly unsigned (README.md, Install, says what that means on macOS).
 */
export function removeSignature(buf, format) {
  if (format === "macho") return removeMachOSignature(buf);
  if (format === "pe") return removePeSignature(buf);
  return buf;
}

const LC_SEGMENT_64 = 0x19;
const LC_CODE_SIGNATURE = 0x1d;

// Mach-O (mach-o/loader.h): drop LC_CODE_SIGNATURE from the load commands and the signature from
// the end of __LINKEDIT, where the linker puts it.
function removeMachOSignature(buf) {
  if (buf.readUInt32LE(0) !== 0xfeedfacf) throw new Error("not a 64-bit little-endian Mach-O file (a universal binary is not supported)");
  const ncmds = buf.readUInt32LE(16);
  const sizeofcmds = buf.readUInt32LE(20);
  let at = 32;
  let sig = -1;
  let linkedit = -1;
  for (let i = 0; i < ncmds; i++) {
    const cmd = buf.readUInt32LE(at);
    if (cmd === LC_CODE_SIGNATURE) sig = at;
    if (cmd === LC_SEGMENT_64 && buf.toString("latin1", at + 8, at + 24).replace(/\0+$/, "") === "__LINKEDIT") linkedit = at;
    at += buf.readUInt32LE(at + 4);
  }
  if (sig < 0) return buf;
  const dataoff = buf.readUInt32LE(sig + 8);
  const datasize = buf.readUInt32LE(sig + 12);
  if (linkedit < 0 || dataoff + datasize !== buf.length) throw new Error("the code signature is not at the end of __LINKEDIT");
  const size = buf.readUInt32LE(sig + 4);
  const end = 32 + sizeofcmds;
  buf.copy(buf, sig, sig + size, end);
  buf.fill(0, end - size, end);
  buf.writeUInt32LE(ncmds - 1, 16);
  buf.writeUInt32LE(sizeofcmds - size, 20);
  if (linkedit > sig) linkedit -= size;
  const fileoff = buf.readBigUInt64LE(linkedit + 40);
  buf.writeBigUInt64LE(BigInt(dataoff) - fileoff, linkedit + 48);
  return buf.subarray(0, dataoff);
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
 * Builds `out`: the target's node with `blob` injected. ELF: a note; PE: an RCDATA resource;
 * Mach-O: a section in a segment named NODE_SEA, where Node looks for it (Node's SEA docs).
 */
export async function buildForeign(target, nodeBinary, blob, out) {
  const { format } = TARGETS[target];
  const tmp = `${out}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, removeSignature(fs.readFileSync(nodeBinary), format));
  const { inject } = createRequire(import.meta.url)("postject");
  // LIEF warns once per ELF note it cannot name (see build.mjs): harmless, and kept off the log.
  const warn = console.warn;
  console.warn = (...a) => /Can't find string offset for section name/.test(String(a[0])) || warn(...a);
  try {
    await inject(tmp, "NODE_SEA_BLOB", blob, { sentinelFuse: SEA_FUSE, ...(format === "macho" ? { machoSegmentName: "NODE_SEA" } : {}) });
  } finally {
    console.warn = warn;
  }
  fs.chmodSync(tmp, 0o755);
  fs.renameSync(tmp, out);
  return out;
}
