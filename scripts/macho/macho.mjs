// A reader for thin 64-bit little-endian Mach-O executables (x86_64 and arm64), the two kinds the
// release ships for macOS. Only what signing and the wheel tags need: the header, the load commands,
// the segments, the code signature's place (LC_CODE_SIGNATURE) and the minimum macOS
// (LC_BUILD_VERSION). Layouts from Apple's <mach-o/loader.h>.

export const MH_MAGIC_64 = 0xfeedfacf;
export const MH_EXECUTE = 0x2;
export const HEADER_SIZE = 32; // struct mach_header_64
export const LC_SEGMENT_64 = 0x19;
export const LC_CODE_SIGNATURE = 0x1d;
export const LC_BUILD_VERSION = 0x32;
export const LINKEDIT_DATA_SIZE = 16; // struct linkedit_data_command
export const CPU_TYPE_X86_64 = 0x01000007;
export const CPU_TYPE_ARM64 = 0x0100000c;

/** A Mach-O that this reader cannot take: the message says what it found. */
export class MachOError extends Error {
  name = "MachOError";
}

/**
 * The parsed layout of `buf`. Offsets are file offsets; each segment keeps the offset of its own
 * load command (`at`) so a writer can patch it in place.
 */
export function readMachO(buf) {
  if (buf.length < HEADER_SIZE) throw new MachOError(`${buf.length} bytes: too short for a Mach-O header`);
  const magic = buf.readUInt32LE(0);
  if (magic === 0xcafebabe || magic === 0xbebafeca) throw new MachOError("a universal (fat) binary: sign each thin slice instead");
  if (magic !== MH_MAGIC_64) throw new MachOError(`magic 0x${magic.toString(16)}: not a 64-bit little-endian Mach-O`);
  const header = {
    cputype: buf.readInt32LE(4),
    filetype: buf.readUInt32LE(12),
    ncmds: buf.readUInt32LE(16),
    sizeofcmds: buf.readUInt32LE(20),
  };
  if (HEADER_SIZE + header.sizeofcmds > buf.length) throw new MachOError("the load commands run past the end of the file");
  const commands = [];
  const segments = [];
  let codeSignature;
  let buildVersion;
  let at = HEADER_SIZE;
  for (let i = 0; i < header.ncmds; i++) {
    if (at + 8 > HEADER_SIZE + header.sizeofcmds) throw new MachOError(`load command ${i} runs past sizeofcmds`);
    const cmd = buf.readUInt32LE(at);
    const cmdsize = buf.readUInt32LE(at + 4);
    if (cmdsize < 8 || at + cmdsize > HEADER_SIZE + header.sizeofcmds) throw new MachOError(`load command ${i} has size ${cmdsize}`);
    commands.push({ cmd, at, size: cmdsize });
    if (cmd === LC_SEGMENT_64) {
      segments.push({
        at,
        name: buf.toString("latin1", at + 8, at + 24).replace(/\0+$/, ""),
        vmaddr: buf.readBigUInt64LE(at + 24),
        vmsize: Number(buf.readBigUInt64LE(at + 32)),
        fileoff: Number(buf.readBigUInt64LE(at + 40)),
        filesize: Number(buf.readBigUInt64LE(at + 48)),
        nsects: buf.readUInt32LE(at + 64),
      });
    } else if (cmd === LC_CODE_SIGNATURE) {
      codeSignature = { at, index: i, dataoff: buf.readUInt32LE(at + 8), datasize: buf.readUInt32LE(at + 12) };
    } else if (cmd === LC_BUILD_VERSION) {
      buildVersion = { platform: buf.readUInt32LE(at + 8), minos: version(buf.readUInt32LE(at + 12)), sdk: version(buf.readUInt32LE(at + 16)) };
    }
    at += cmdsize;
  }
  return { header, commands, segments, codeSignature, buildVersion, commandsEnd: at, firstSectionOffset: firstSectionOffset(buf, segments) };
}

/** `xxxx.yy.zz` nibbles (loader.h: "X.Y.Z is encoded in nibbles xxxx.yy.zz"). */
function version(v) {
  return { major: v >>> 16, minor: (v >>> 8) & 0xff, patch: v & 0xff, text: `${v >>> 16}.${(v >>> 8) & 0xff}${v & 0xff ? `.${v & 0xff}` : ""}` };
}

/**
 * The lowest file offset of any section with contents: the load commands may grow into the gap
 * before it (the linker's header padding), never past it.
 */
function firstSectionOffset(buf, segments) {
  let min = buf.length;
  for (const seg of segments) {
    for (let s = 0; s < seg.nsects; s++) {
      const at = seg.at + 72 + s * 80; // struct segment_command_64, then struct section_64 each
      const offset = buf.readUInt32LE(at + 48);
      const flags = buf.readUInt32LE(at + 64);
      const zerofill = (flags & 0xff) === 0x1 || (flags & 0xff) === 0xc || (flags & 0xff) === 0x12; // S_ZEROFILL, S_GB_ZEROFILL, S_THREAD_LOCAL_ZEROFILL
      if (offset !== 0 && !zerofill) min = Math.min(min, offset);
    }
  }
  return min;
}

/** The segment named `name`, or a MachOError saying it is missing. */
export function segment(macho, name) {
  const seg = macho.segments.find((s) => s.name === name);
  if (!seg) throw new MachOError(`no ${name} segment`);
  return seg;
}
