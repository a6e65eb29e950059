// The shared libraries a Linux binary needs beyond what a Debian slim image ships, vendored beside it
// the way auditwheel vendors a wheel's: copied into a lib/ folder next to the binary, which finds them
// through a RUNPATH of $ORIGIN/lib (docs/runtime.md, "Linux libraries"). Node 26's Linux binaries
// need libatomic.so.1 (Node 20's did not), and the slim images (debian:*-slim, python:3.x-slim, made
// with debootstrap's minbase variant) do not have it.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

/**
 * The sonames every Debian slim image has: those of the packages of debootstrap's minbase variant
 * that a C++ program links to, libc6 (libc, libm, libdl, libpthread, librt, the dynamic loader and
 * the rest of glibc), libgcc-s1 (Priority: required) and libstdc++6 (a dependency of apt, which
 * minbase installs). Anything else the binary needs is vendored. test/release/slim-root.ts proves
 * the list against a real minbase root.
 */
const SLIM = /^(lib(c|m|dl|pthread|rt|resolv|util|anl|nsl|mvec)\.so\.\d+|ld-linux-(x86-64|aarch64)\.so\.\d+|libgcc_s\.so\.1|libstdc\+\+\.so\.6)$/;

/** The DT_NEEDED entries of an ELF file, as readelf (binutils) prints them. */
export function needed(file) {
  const out = execFileSync("readelf", ["-d", "--wide", file], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  return [...out.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
}

/** What `file` needs beyond a slim image: the sonames to vendor. */
export const toVendor = (file) => needed(file).filter((lib) => !SLIM.test(lib));

/**
 * Copies the libraries `binary` needs beyond a slim image into `libDir` (from this machine's
 * /usr/lib/<triplet>/, Debian's multiarch folder: for linux-x64 Debian's libatomic1, for linux-arm64
 * libatomic1:arm64), each with its Debian package's copyright file beside it (libatomic: GPL-3 with
 * the GCC Runtime Library Exception, which allows shipping it with a program of any licence), then
 * sets the binary's RUNPATH to $ORIGIN/lib with Debian's patchelf. It runs after --build-sea: the
 * injection rewrites the ELF (LIEF) and loses a RUNPATH patched in before it; patchelf after it
 * keeps the NODE_SEA_BLOB note where node looks for it (the release tests run the patched binaries).
 * Returns the vendored sonames; none, and the binary is left as it is.
 */
export function vendorLibraries(binary, triplet, libDir) {
  const libs = toVendor(binary);
  if (libs.length === 0) return libs;
  fs.mkdirSync(libDir, { recursive: true });
  // Each file by a rename: a binary started meanwhile from the same folder finds a whole library.
  const put = (from, name, mode) => {
    const tmp = path.join(libDir, `.${name}.${process.pid}.tmp`);
    fs.copyFileSync(from, tmp);
    fs.chmodSync(tmp, mode);
    fs.renameSync(tmp, path.join(libDir, name));
  };
  for (const lib of libs) {
    const source = path.join("/usr/lib", triplet, lib);
    if (!fs.existsSync(source)) {
      throw new Error(`${path.basename(binary)} needs ${lib}, which a Debian slim image lacks and which is vendored from ${source}: `
        + `not found (install Debian's ${lib.replace(/\.so\.(\d+)$/, "$1")}${triplet.startsWith("x86_64") ? "" : ":arm64"})`);
    }
    put(fs.realpathSync(source), lib, 0o644);
    const owner = execFileSync("dpkg", ["-S", fs.realpathSync(source)], { encoding: "utf8" }).split(":")[0];
    put(path.join("/usr/share/doc", owner, "copyright"), `${lib}.copyright`, 0o644);
  }
  execFileSync("patchelf", ["--set-rpath", "$ORIGIN/lib", binary], { stdio: ["ignore", "ignore", "pipe"] });
  return libs;
}
