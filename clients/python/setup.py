"""The wheel's platform tag, read from the binary it carries (the rest is in pyproject.toml).

A platform wheel holds a native executable, so it is not pure ("Root-Is-Purelib: false") and its tag is
py3-none-<platform>: any Python 3 (the client is pure Python and loads no extension, hence no ABI),
and the platform the binary runs on. That platform is worked out here from the binary's headers, not
written down by hand:
- ELF: manylinux_2_<N>_<arch>, where 2.<N> is the newest GLIBC_ symbol version it needs, or any
  library vendored beside it in bin/lib/ needs (PEP 600: it runs on any distribution with glibc 2.<N>
  or later; the vendored libraries are those a Debian slim image lacks, as auditwheel vendors them). The build stops if the binary needs a library
  outside the manylinux set, or libstdc++/libgcc symbol versions newer than distributions of that glibc
  baseline ship (the ceilings are those of auditwheel's manylinux policy).
- PE32+: win_amd64 or win_arm64, from the COFF Machine field.
- Mach-O: macosx_<major>_<minor>_<arch>, the minimum macOS its LC_BUILD_VERSION (or
  LC_VERSION_MIN_MACOSX) load command names; from macOS 11 on, the minor is 0 (packaging's rule).

With no binary staged in agui_state/bin/, the wheel is the pure py3-none-any one: the same clients,
which then find the sidecar through AGUI_STATE_BIN or PATH.
"""
import re
import struct
import sys
from pathlib import Path

from setuptools import setup
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    from wheel.bdist_wheel import bdist_wheel  # Debian 12: setuptools 66 and python3-wheel

HERE = Path(__file__).resolve().parent
BIN = HERE / "agui_state" / "bin"
BINARIES = sorted(BIN.glob("agui-state*")) if BIN.is_dir() else []
VERSION = HERE / "agui_state" / "_version.py"

ARCH = {62: "x86_64", 183: "aarch64"}  # ELF e_machine
# glibc baseline -> the newest GLIBCXX_, CXXABI_ and GCC_ versions guaranteed with it (auditwheel policy).
CEILINGS = {
    17: ("3.4.19", "1.3.7", "4.8.0"), 24: ("3.4.22", "1.3.10", "4.8.0"), 27: ("3.4.24", "1.3.11", "7.0.0"),
    31: ("3.4.28", "1.3.12", "7.0.0"), 34: ("3.4.29", "1.3.13", "7.0.0"), 35: ("3.4.30", "1.3.13", "12.0.0"),
}
MANYLINUX_LIBS = {
    "libatomic.so.1", "libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libmvec.so.1", "libanl.so.1",
    "libdl.so.2", "librt.so.1", "libc.so.6", "libnsl.so.1", "libutil.so.1", "libpthread.so.0",
    "libresolv.so.2", "libz.so.1", "libexpat.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}


def fail(message):
    sys.exit(f"agui-state wheel: {message}")


def elf_needs(path):
    """(e_machine, the DT_NEEDED libraries, the symbol version names of .gnu.version_r) of a 64-bit
    little-endian ELF executable."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        fail(f"{path} is not a 64-bit little-endian ELF executable: no manylinux tag fits it")
    machine = struct.unpack_from("<H", data, 18)[0]
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    # Each section header: name, type, flags, addr, offset, size, link, info, addralign, entsize.
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]

    def string(table, offset):
        start = sections[table][4] + offset
        return data[start:data.index(b"\0", start)].decode("ascii")

    needed, versions = [], set()
    for _, kind, _, _, offset, size, link, info, _, _ in sections:
        if kind == 6:  # SHT_DYNAMIC: (d_tag, d_val) pairs, DT_NEEDED = 1, DT_NULL = 0 ends them
            for at in range(offset, offset + size, 16):
                tag, val = struct.unpack_from("<qQ", data, at)
                if tag == 0:
                    break
                if tag == 1:
                    needed.append(string(link, val))
        elif kind == 0x6FFFFFFE:  # SHT_GNU_verneed: `info` entries, each with a chain of Vernaux
            at = offset
            for _ in range(info):
                _, count, _, aux, next_entry = struct.unpack_from("<HHIII", data, at)
                here = at + aux
                for _ in range(count):
                    _, _, _, name, next_aux = struct.unpack_from("<IHHII", data, here)
                    versions.add(string(link, name))
                    here += next_aux
                at += next_entry
    return machine, needed, versions


def newest(versions, prefix):
    found = [tuple(int(n) for n in v[len(prefix):].split(".")) for v in versions
             if re.fullmatch(re.escape(prefix) + r"\d+(\.\d+)*", v)]
    return max(found) if found else None


def head(path, size):
    with open(path, "rb") as f:
        return f.read(size)


def platform_tag(path):
    magic = head(path, 4)
    if magic[:2] == b"MZ":
        return pe_tag(path)
    if magic == b"\xcf\xfa\xed\xfe":
        return macos_tag(path)
    return manylinux_tag(path)


PE_MACHINE = {0x8664: "win_amd64", 0xAA64: "win_arm64"}
MACHO_CPU = {0x01000007: "x86_64", 0x0100000C: "arm64"}


def pe_tag(path):
    """PE/COFF: the "PE\\0\\0" signature at e_lfanew, then the COFF header's Machine; PE32+ (optional
    header magic 0x20b) is the only kind a 64-bit tag fits."""
    data = head(path, 4096)
    pe = struct.unpack_from("<I", data, 0x3C)[0]
    if data[pe:pe + 4] != b"PE\0\0" or struct.unpack_from("<H", data, pe + 24)[0] != 0x20B:
        fail(f"{path} is not a PE32+ executable: no Windows tag fits it")
    machine = struct.unpack_from("<H", data, pe + 4)[0]
    return PE_MACHINE.get(machine) or fail(f"{path}: no Windows tag for PE machine 0x{machine:x}")


def macos_tag(path):
    """Mach-O 64 (mach-o/loader.h): cputype, then the load commands after the 32-byte header."""
    data = path.read_bytes()
    cpu, _, _, ncmds = struct.unpack_from("<IIII", data, 4)
    arch = MACHO_CPU.get(cpu) or fail(f"{path}: no macOS tag for Mach-O cputype 0x{cpu:x}")
    at, minos = 32, None
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, at)
        if cmd == 0x32 and struct.unpack_from("<I", data, at + 8)[0] == 1:  # LC_BUILD_VERSION, PLATFORM_MACOS
            minos = struct.unpack_from("<I", data, at + 12)[0]
        elif cmd == 0x24:  # LC_VERSION_MIN_MACOSX
            minos = struct.unpack_from("<I", data, at + 8)[0]
        at += size
    if minos is None:
        fail(f"{path} names no minimum macOS (no LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX)")
    major, minor = minos >> 16, (minos >> 8) & 0xFF
    return f"macosx_{major}_{0 if major >= 11 else minor}_{arch}"


def manylinux_tag(path):
    machine, needed, versions = elf_needs(path)
    # The libraries vendored beside the binary (its RUNPATH is $ORIGIN/lib) count as part of it.
    lib = path.parent / "lib"
    for vendored in sorted(lib.glob("*.so*")) if lib.is_dir() else []:
        if vendored.name.endswith(".copyright"):
            continue
        _, their_needs, their_versions = elf_needs(vendored)
        needed += their_needs
        versions |= their_versions
    arch = ARCH.get(machine) or fail(f"{path}: no manylinux tag for ELF machine {machine}")
    glibc = newest(versions, "GLIBC_")
    if glibc is None or glibc[0] != 2:
        fail(f"{path} needs no GLIBC_2.* symbol version: not a glibc binary, so no manylinux tag fits it")
    baseline = max((k for k in CEILINGS if k <= glibc[1]), default=None)
    if baseline is None:
        fail(f"{path} needs only glibc 2.{glibc[1]}, older than any baseline known here")
    for prefix, ceiling in zip(("GLIBCXX_", "CXXABI_", "GCC_"), CEILINGS[baseline]):
        need = newest(versions, prefix)
        if need is not None and need > tuple(int(n) for n in ceiling.split(".")):
            fail(f"{path} needs {prefix}{'.'.join(map(str, need))}, newer than the {prefix}{ceiling} "
                 f"that glibc 2.{glibc[1]} distributions ship")
    outside = sorted(set(needed) - MANYLINUX_LIBS)
    if outside:
        fail(f"{path} needs libraries outside the manylinux set: {', '.join(outside)}")
    return f"manylinux_2_{glibc[1]}_{arch}"


class BinaryDistribution(Distribution):
    """Not pure: the files go to platlib, at the wheel's root ("Root-Is-Purelib: false")."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        return "py3", "none", platform_tag(BINARIES[0])


if __name__ == "__main__" and sys.argv[1:2] == ["--platform-tag"]:
    # python3 setup.py --platform-tag FILE: the tag this file would give a wheel, nothing built.
    print(platform_tag(Path(sys.argv[2])))
    sys.exit(0)

if not VERSION.is_file():
    fail("agui_state/_version.py is missing. Build the wheel from the repository's root with "
         "`node scripts/build-wheel.mjs`, which stages it (and the binary, for a platform wheel).")
if len(BINARIES) > 1:
    fail(f"more than one binary staged in agui_state/bin/: {', '.join(b.name for b in BINARIES)}")

if BINARIES:
    setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
else:
    setup()  # the pure py3-none-any wheel
