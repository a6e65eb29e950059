#!/usr/bin/env node
// An ad-hoc code signature for a thin 64-bit Mach-O executable, written the way Go's linker writes
// one for every darwin/arm64 binary (cmd/internal/codesign): an embedded-signature SuperBlob holding
// one CodeDirectory (version 0x20400, SHA-256 over 4 KiB pages, flags adhoc | linker-signed, the
// executable segment named), placed 16-byte aligned at the end of __LINKEDIT and named by an
// LC_CODE_SIGNATURE load command. macOS on Apple Silicon refuses to run an arm64 executable without a
// valid signature, and an ad-hoc one needs no certificate, so this is what makes a SEA built from
// Node's darwin binary launch there. Blob layouts from xnu's osfmk/kern/cs_blobs.h.
//
//   node scripts/macho/sign.mjs sign --identifier ID IN [OUT]   (OUT defaults to IN)
//   node scripts/macho/sign.mjs remove IN [OUT]
import { createHash } from "node:crypto";
import fs from "node:fs";
import { pathToFileURL } from "node:url";
import { CPU_TYPE_ARM64, LC_CODE_SIGNATURE, LINKEDIT_DATA_SIZE, MachOError, MH_EXECUTE, readMachO, segment } from "./macho.mjs";

const CSMAGIC_EMBEDDED_SIGNATURE = 0xfade0cc0;
const CSMAGIC_CODEDIRECTORY = 0xfade0c02;
const CSSLOT_CODEDIRECTORY = 0;
const CS_HASHTYPE_SHA256 = 2;
const CS_EXECSEG_MAIN_BINARY = 0x1;
export const CS_ADHOC = 0x2;
export const CS_LINKER_SIGNED = 0x20000;
const CD_VERSION = 0x20400; // the first version with the exec segment fields
const PAGE_BITS = 12;
const PAGE = 1 << PAGE_BITS;
const SUPERBLOB_SIZE = 12; // magic, length, count
const BLOB_INDEX_SIZE = 8; // type, offset
const CODEDIRECTORY_SIZE = 88; // struct CS_CodeDirectory up to execSegFlags
const HASH_SIZE = 32;

/** The signature's size for `codeLimit` bytes of code and this identifier (Go's codesign.Size). */
export function signatureSize(codeLimit, identifier) {
  const pages = Math.ceil(codeLimit / PAGE);
  return SUPERBLOB_SIZE + BLOB_INDEX_SIZE + CODEDIRECTORY_SIZE + Buffer.byteLength(identifier) + 1 + pages * HASH_SIZE;
}

/** The page size a segment's vmsize is rounded to, for a segment whose vmsize was rounded. */
const vmPage = (cputype) => (cputype === CPU_TYPE_ARM64 ? 0x4000 : 0x1000);
const roundUp = (n, to) => Math.ceil(n / to) * to;

/** Sets __LINKEDIT's file size, and its vm size to match as the file had it: equal, or page-rounded. */
function resizeLinkedit(out, macho, filesize) {
  const seg = segment(macho, "__LINKEDIT");
  const vmsize = seg.vmsize === seg.filesize ? filesize : roundUp(filesize, vmPage(macho.header.cputype));
  out.writeBigUInt64LE(BigInt(vmsize), seg.at + 32);
  out.writeBigUInt64LE(BigInt(filesize), seg.at + 48);
}

/** Checks that __LINKEDIT is the file's last bytes, where a signature lives (and grows). */
function linkeditLast(macho, length) {
  const seg = segment(macho, "__LINKEDIT");
  if (seg.fileoff + seg.filesize !== length) throw new MachOError(`__LINKEDIT ends at ${seg.fileoff + seg.filesize}, the file at ${length}: the signature must be last`);
  return seg;
}

/**
 * `buf` without its code signature, as `codesign --remove-signature` leaves a file: the
 * LC_CODE_SIGNATURE command taken out (later commands move up), the signature's bytes cut off and
 * __LINKEDIT shrunk to end where they began. A file with no signature comes back as a copy.
 */
export function removeSignature(buf) {
  const macho = readMachO(buf);
  const sig = macho.codeSignature;
  if (!sig) return Buffer.from(buf);
  const linkedit = linkeditLast(macho, buf.length);
  if (sig.dataoff < linkedit.fileoff || sig.dataoff + sig.datasize !== buf.length) throw new MachOError("the code signature is not at the end of __LINKEDIT");
  const out = Buffer.from(buf.subarray(0, sig.dataoff));
  out.copy(out, sig.at, sig.at + LINKEDIT_DATA_SIZE, macho.commandsEnd);
  out.fill(0, macho.commandsEnd - LINKEDIT_DATA_SIZE, macho.commandsEnd);
  out.writeUInt32LE(macho.header.ncmds - 1, 16);
  out.writeUInt32LE(macho.header.sizeofcmds - LINKEDIT_DATA_SIZE, 20);
  resizeLinkedit(out, readMachO(out), sig.dataoff - linkedit.fileoff);
  return out;
}

/**
 * `buf` with an ad-hoc signature in place of any it had. `identifier` is the CodeDirectory's
 * identifier (Go writes "a.out"; codesign the file's name); `flags` defaults to adhoc | linker-signed,
 * what Go's and Apple's linkers write, and is what macOS accepts for an unsigned-by-Apple executable.
 */
export function signAdhoc(buf, { identifier, flags = CS_ADHOC | CS_LINKER_SIGNED }) {
  if (typeof identifier !== "string" || identifier === "" || identifier.includes("\0")) throw new MachOError("the identifier must be a non-empty string without NUL");
  const bare = removeSignature(buf);
  const macho = readMachO(bare);
  if (macho.commandsEnd + LINKEDIT_DATA_SIZE > macho.firstSectionOffset) throw new MachOError(`no room for LC_CODE_SIGNATURE: the load commands end at ${macho.commandsEnd}, the first section starts at ${macho.firstSectionOffset}`);
  const linkedit = linkeditLast(macho, bare.length);
  const text = segment(macho, "__TEXT");
  // Go's linker and codesign_allocate start the signature on a 16-byte boundary.
  const codeLimit = roundUp(bare.length, 16);
  const size = signatureSize(codeLimit, identifier);
  if (codeLimit + size > 0xffffffff) throw new MachOError("over 4 GiB: a CodeDirectory's codeLimit is 32 bits");

  const out = Buffer.alloc(codeLimit + size);
  bare.copy(out);
  // The load command first: the header and load commands are in the first page, which is hashed.
  out.writeUInt32LE(LC_CODE_SIGNATURE, macho.commandsEnd);
  out.writeUInt32LE(LINKEDIT_DATA_SIZE, macho.commandsEnd + 4);
  out.writeUInt32LE(codeLimit, macho.commandsEnd + 8);
  out.writeUInt32LE(size, macho.commandsEnd + 12);
  out.writeUInt32LE(macho.header.ncmds + 1, 16);
  out.writeUInt32LE(macho.header.sizeofcmds + LINKEDIT_DATA_SIZE, 20);
  resizeLinkedit(out, macho, codeLimit + size - linkedit.fileoff);

  const identOffset = CODEDIRECTORY_SIZE;
  const hashOffset = identOffset + Buffer.byteLength(identifier) + 1;
  const pages = Math.ceil(codeLimit / PAGE);
  let at = codeLimit;
  const u32 = (v) => { out.writeUInt32BE(v >>> 0, at); at += 4; };
  const u64 = (v) => { out.writeBigUInt64BE(BigInt(v), at); at += 8; };
  const u8 = (v) => { out.writeUInt8(v, at); at += 1; };
  // SuperBlob with one index entry: the CodeDirectory, right after it.
  u32(CSMAGIC_EMBEDDED_SIGNATURE); u32(size); u32(1);
  u32(CSSLOT_CODEDIRECTORY); u32(SUPERBLOB_SIZE + BLOB_INDEX_SIZE);
  // CS_CodeDirectory, big-endian as every code-signing blob.
  u32(CSMAGIC_CODEDIRECTORY); u32(size - SUPERBLOB_SIZE - BLOB_INDEX_SIZE); u32(CD_VERSION); u32(flags);
  u32(hashOffset); u32(identOffset); u32(0 /* nSpecialSlots */); u32(pages); u32(codeLimit);
  u8(HASH_SIZE); u8(CS_HASHTYPE_SHA256); u8(0 /* platform */); u8(PAGE_BITS);
  u32(0 /* spare2 */); u32(0 /* scatterOffset */); u32(0 /* teamOffset */); u32(0 /* spare3 */);
  u64(0 /* codeLimit64: codeLimit fits */); u64(text.fileoff); u64(text.filesize);
  u64(macho.header.filetype === MH_EXECUTE ? CS_EXECSEG_MAIN_BINARY : 0);
  at += out.write(identifier, at, "utf8") + 1;
  // One SHA-256 per 4 KiB page of everything before the signature; the last page may be short.
  for (let p = 0; p < pages; p++) {
    createHash("sha256").update(out.subarray(p * PAGE, Math.min((p + 1) * PAGE, codeLimit))).digest().copy(out, at);
    at += HASH_SIZE;
  }
  return out;
}

function main(argv) {
  const [verb, ...rest] = argv;
  let identifier;
  const files = [];
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === "--identifier") identifier = rest[++i];
    else files.push(rest[i]);
  }
  const [input, output = input] = files;
  if (!input || files.length > 2 || (verb === "sign" && !identifier) || (verb !== "sign" && verb !== "remove")) {
    process.stderr.write("usage: sign.mjs sign --identifier ID IN [OUT] | sign.mjs remove IN [OUT]\n");
    return 2;
  }
  try {
    const buf = fs.readFileSync(input);
    const out = verb === "sign" ? signAdhoc(buf, { identifier }) : removeSignature(buf);
    fs.writeFileSync(output, out, { mode: fs.statSync(input).mode });
    return 0;
  } catch (err) {
    if (!(err instanceof MachOError)) throw err;
    process.stderr.write(`${input}: ${err.message}\n`);
    return 1;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) process.exitCode = main(process.argv.slice(2));
