/**
 * Reads, independently of the release scripts, what the release tests check in a binary built for a
 * platform this machine cannot run: its format and CPU, and the SEA blob `node --build-sea` wrote where
 * Node looks for it (Node's SEA docs: an ELF note, a PE RCDATA resource, a Mach-O section in the
 * NODE_SEA segment), each named NODE_SEA_BLOB (the Mach-O section __NODE_SEA_BLOB). Every reader
 * returns what it found, or a string saying what is missing.
 */

export type Exe = {
  format: "elf" | "pe" | "macho";
  /** ELF e_machine, PE Machine, Mach-O cputype, as the format numbers them. */
  machine: number;
  /** The injected NODE_SEA_BLOB, or undefined when there is none. */
  blob: Buffer | undefined;
  /** PE: whether an Authenticode certificate table is left; Mach-O: whether LC_CODE_SIGNATURE is. */
  signed: boolean;
  /** Mach-O: the minimum macOS (LC_BUILD_VERSION or LC_VERSION_MIN_MACOSX), as [major, minor]. */
  minOs?: [number, number];
};

export const ELF_AARCH64 = 183;
export const PE_AMD64 = 0x8664;
export const MACHO_X86_64 = 0x01000007;
export const MACHO_ARM64 = 0x0100000c;
export const BLOB_NAME = "NODE_SEA_BLOB";

export function readExe(buf: Buffer): Exe | string {
  if (buf.readUInt32BE(0) === 0x7f454c46) return readElf(buf);
  if (buf.toString("latin1", 0, 2) === "MZ") return readPe(buf);
  if (buf.readUInt32LE(0) === 0xfeedfacf) return readMachO(buf);
  return "neither ELF, PE nor 64-bit Mach-O";
}

// ELF-64 (System V gABI): the program headers' PT_NOTE segments, each a run of notes
// (namesz, descsz, type, name, desc; name and desc padded to 4 bytes).
function readElf(buf: Buffer): Exe | string {
  if (buf[4] !== 2 || buf[5] !== 1) return "not a 64-bit little-endian ELF file";
  const phoff = Number(buf.readBigUInt64LE(0x20));
  const phentsize = buf.readUInt16LE(0x36);
  const phnum = buf.readUInt16LE(0x38);
  let blob: Buffer | undefined;
  for (let i = 0; i < phnum; i++) {
    const ph = phoff + i * phentsize;
    if (buf.readUInt32LE(ph) !== 4) continue; // PT_NOTE
    const start = Number(buf.readBigUInt64LE(ph + 8));
    const end = start + Number(buf.readBigUInt64LE(ph + 32));
    for (let at = start; at + 12 <= end;) {
      const namesz = buf.readUInt32LE(at);
      const descsz = buf.readUInt32LE(at + 4);
      const name = buf.toString("latin1", at + 12, at + 12 + namesz).replace(/\0+$/, "");
      const desc = at + 12 + align4(namesz);
      if (name === BLOB_NAME) blob = buf.subarray(desc, desc + descsz);
      at = desc + align4(descsz);
    }
  }
  return { format: "elf", machine: buf.readUInt16LE(18), blob, signed: false };
}

const align4 = (n: number): number => (n + 3) & ~3;

// PE/COFF (Microsoft's PE format): the PE32+ optional header's data directories 2 (resources) and
// 4 (certificates); the resource tree is type -> name -> language -> data entry, with RVAs mapped
// to file offsets through the section table.
function readPe(buf: Buffer): Exe | string {
  const pe = buf.readUInt32LE(0x3c);
  if (buf.toString("latin1", pe, pe + 4) !== "PE\0\0") return "no PE signature";
  const machine = buf.readUInt16LE(pe + 4);
  const nsections = buf.readUInt16LE(pe + 6);
  const optSize = buf.readUInt16LE(pe + 20);
  const opt = pe + 24;
  if (buf.readUInt16LE(opt) !== 0x20b) return "not PE32+ (optional header magic is not 0x20b)";
  const dirs = opt + 112;
  const rsrcRva = buf.readUInt32LE(dirs + 2 * 8);
  const signed = buf.readUInt32LE(dirs + 4 * 8) !== 0;
  const sections = Array.from({ length: nsections }, (_, i) => {
    const s = opt + optSize + i * 40;
    return { va: buf.readUInt32LE(s + 12), size: buf.readUInt32LE(s + 8), raw: buf.readUInt32LE(s + 20) };
  });
  const offset = (rva: number): number => {
    const s = sections.find((x) => rva >= x.va && rva < x.va + x.size);
    if (!s) throw new Error(`RVA ${rva} is in no section`);
    return rva - s.va + s.raw;
  };
  const base = rsrcRva ? offset(rsrcRva) : -1;
  /** The entries of the resource directory at `dir` (an offset into .rsrc): [name or id, target]. */
  const entries = (dir: number): [string | number, number][] => {
    const n = buf.readUInt16LE(base + dir + 12) + buf.readUInt16LE(base + dir + 14);
    return Array.from({ length: n }, (_, i) => {
      const e = base + dir + 16 + i * 8;
      const name = buf.readUInt32LE(e);
      const key = name & 0x80000000 ? readPeName(buf, base + (name & 0x7fffffff)) : name;
      return [key, buf.readUInt32LE(e + 4)];
    });
  };
  let blob: Buffer | undefined;
  if (base >= 0) {
    const rcdata = entries(0).find(([k]) => k === 10); // RT_RCDATA
    const named = rcdata && entries(rcdata[1] & 0x7fffffff).find(([k]) => k === BLOB_NAME);
    const lang = named && entries(named[1] & 0x7fffffff)[0];
    if (lang && !(lang[1] & 0x80000000)) {
      const data = base + lang[1];
      const at = offset(buf.readUInt32LE(data));
      blob = buf.subarray(at, at + buf.readUInt32LE(data + 4));
    }
  }
  return { format: "pe", machine, blob, signed };
}

const readPeName = (buf: Buffer, at: number): string => buf.toString("utf16le", at + 2, at + 2 + 2 * buf.readUInt16LE(at));

// Mach-O (mach-o/loader.h): the load commands after the 32-byte mach_header_64.
function readMachO(buf: Buffer): Exe | string {
  const machine = buf.readUInt32LE(4);
  const ncmds = buf.readUInt32LE(16);
  let blob: Buffer | undefined;
  let signed = false;
  let minOs: [number, number] | undefined;
  const version = (v: number): [number, number] => [v >>> 16, (v >>> 8) & 0xff];
  for (let i = 0, at = 32; i < ncmds; i++, at += buf.readUInt32LE(at + 4)) {
    const cmd = buf.readUInt32LE(at);
    if (cmd === 0x1d) signed = true; // LC_CODE_SIGNATURE
    if (cmd === 0x32 && buf.readUInt32LE(at + 8) === 1) minOs = version(buf.readUInt32LE(at + 12)); // LC_BUILD_VERSION, PLATFORM_MACOS
    if (cmd === 0x24) minOs = version(buf.readUInt32LE(at + 8)); // LC_VERSION_MIN_MACOSX
    if (cmd !== 0x19 || cstr(buf, at + 8) !== "NODE_SEA") continue; // LC_SEGMENT_64
    for (let s = 0; s < buf.readUInt32LE(at + 64); s++) {
      const sect = at + 72 + s * 80; // section_64
      if (cstr(buf, sect) !== `__${BLOB_NAME}`) continue; // the section name is prefixed, as Node expects
      const off = buf.readUInt32LE(sect + 48);
      blob = buf.subarray(off, off + Number(buf.readBigUInt64LE(sect + 40)));
    }
  }
  return { format: "macho", machine, blob, signed, ...(minOs ? { minOs } : {}) };
}

const cstr = (buf: Buffer, at: number): string => buf.toString("latin1", at, at + 16).replace(/\0.*$/s, "");

/**
 * Node's SEA blob as Node 26 writes it (src/node_sea.cc, SeaSerializer): magic, flags, two one-byte
 * fields Node 20's blob did not have (settings that came with ESM mains and exec arguments; read as
 * they are, and compared between targets), then the code path and the main script, each prefixed by
 * its length (u64).
 */
export type SeaBlob = { flags: number; settings: [number, number]; codePath: string; main: string };
export const SEA_MAGIC = 0x143da20;
export const SEA_USE_CODE_CACHE = 1 << 2;

export function readSeaBlob(blob: Buffer): SeaBlob | string {
  if (blob.readUInt32LE(0) !== SEA_MAGIC) return `no SEA magic: 0x${blob.readUInt32LE(0).toString(16)}`;
  const flags = blob.readUInt32LE(4);
  const settings: [number, number] = [blob.readUInt8(8), blob.readUInt8(9)];
  const pathLen = Number(blob.readBigUInt64LE(10));
  if (pathLen > 4096) return `a code path of ${pathLen} bytes: not Node 26's layout`;
  const codePath = blob.toString("utf8", 18, 18 + pathLen);
  const mainAt = 18 + pathLen;
  const mainLen = Number(blob.readBigUInt64LE(mainAt));
  if (mainAt + 8 + mainLen > blob.length) return `a main script of ${mainLen} bytes past the blob's end: not Node 26's layout`;
  return { flags, settings, codePath, main: blob.toString("utf8", mainAt + 8, mainAt + 8 + mainLen) };
}
