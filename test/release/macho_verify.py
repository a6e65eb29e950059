#!/usr/bin/env python3
"""Checks the ad-hoc code signature of a thin 64-bit Mach-O executable, independently of the signer
in scripts/macho/ (another language, its own reading of Apple's <mach-o/loader.h> and xnu's
cs_blobs.h): the LC_CODE_SIGNATURE load command, the embedded-signature SuperBlob at the end of
__LINKEDIT, and its CodeDirectory, whose every page hash is recomputed over the file.

    python3 macho_verify.py FILE

Prints one JSON object: {"ok": true, ...the CodeDirectory's fields...} and exits 0, or
{"ok": false, "error": "..."} and exits 1. A file with no signature is {"ok": false, "signed": false}.
"""
import hashlib
import json
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
MH_EXECUTE = 0x2
LC_SEGMENT_64 = 0x19
LC_CODE_SIGNATURE = 0x1D
CSMAGIC_EMBEDDED_SIGNATURE = 0xFADE0CC0
CSMAGIC_CODEDIRECTORY = 0xFADE0C02
CSSLOT_CODEDIRECTORY = 0
CS_ADHOC = 0x2
CS_HASHTYPE_SHA256 = 2
CS_EXECSEG_MAIN_BINARY = 0x1


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def verify(data):
    need(len(data) >= 32, "too short for a Mach-O header")
    magic, _cpu, _sub, filetype, ncmds, sizeofcmds, _flags, _res = struct.unpack_from("<IiiIIIII", data, 0)
    need(magic == MH_MAGIC_64, "not a thin 64-bit little-endian Mach-O (magic %#x)" % magic)
    off, segs, sig, last = 32, {}, None, None
    for i in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        need(size >= 8 and off + size <= 32 + sizeofcmds, "load command %d is malformed" % i)
        if cmd == LC_SEGMENT_64:
            name = data[off + 8:off + 24].rstrip(b"\0").decode("latin-1")
            vmaddr, vmsize, fileoff, filesize = struct.unpack_from("<QQQQ", data, off + 24)
            segs[name] = {"vmsize": vmsize, "fileoff": fileoff, "filesize": filesize}
        elif cmd == LC_CODE_SIGNATURE:
            need(sig is None, "two LC_CODE_SIGNATURE commands")
            need(size == 16, "LC_CODE_SIGNATURE has cmdsize %d" % size)
            sig = struct.unpack_from("<II", data, off + 8)
        last = cmd
        off += size
    if sig is None:
        return {"ok": False, "signed": False, "error": "no LC_CODE_SIGNATURE"}
    need(last == LC_CODE_SIGNATURE, "LC_CODE_SIGNATURE is not the last load command")
    dataoff, datasize = sig
    need(dataoff % 16 == 0, "the signature does not start on a 16-byte boundary")
    need(dataoff + datasize == len(data), "bytes follow the signature (%d + %d != %d)" % (dataoff, datasize, len(data)))
    le = segs.get("__LINKEDIT")
    need(le is not None, "no __LINKEDIT segment")
    need(le["fileoff"] <= dataoff and le["fileoff"] + le["filesize"] == len(data), "__LINKEDIT does not end with the signature")
    need(le["vmsize"] >= le["filesize"], "__LINKEDIT's vmsize is below its filesize")
    text = segs.get("__TEXT")
    need(text is not None, "no __TEXT segment")

    sb = data[dataoff:dataoff + datasize]
    sb_magic, sb_len, count = struct.unpack_from(">III", sb, 0)
    need(sb_magic == CSMAGIC_EMBEDDED_SIGNATURE, "SuperBlob magic %#x" % sb_magic)
    need(sb_len <= datasize, "SuperBlob length %d past datasize %d" % (sb_len, datasize))
    cd_off = None
    for k in range(count):
        typ, boff = struct.unpack_from(">II", sb, 12 + 8 * k)
        if typ == CSSLOT_CODEDIRECTORY:
            cd_off = boff
    need(cd_off is not None, "no CodeDirectory in the SuperBlob")
    (cd_magic, cd_len, version, flags, hash_off, ident_off, n_special, n_code, code_limit,
     hash_size, hash_type, platform, page_bits, _spare2, _scatter, team_off, _spare3,
     code_limit64, exec_base, exec_limit, exec_flags) = struct.unpack_from(">IIIIIIIIIBBBBIIIIQQQQ", sb, cd_off)
    need(cd_magic == CSMAGIC_CODEDIRECTORY, "CodeDirectory magic %#x" % cd_magic)
    need(cd_off + cd_len <= sb_len, "the CodeDirectory runs past the SuperBlob")
    need(version >= 0x20400, "CodeDirectory version %#x has no executable segment fields" % version)
    need(flags & CS_ADHOC, "not ad-hoc (flags %#x)" % flags)
    need(hash_type == CS_HASHTYPE_SHA256 and hash_size == 32, "hash type %d size %d, not SHA-256" % (hash_type, hash_size))
    need(page_bits == 12, "page size 2^%d, not 4096" % page_bits)
    need(code_limit == dataoff and code_limit64 == 0, "codeLimit %d is not the signature's offset %d" % (code_limit, dataoff))
    page = 1 << page_bits
    need(n_code == (code_limit + page - 1) // page, "%d code slots for %d bytes" % (n_code, code_limit))
    need(exec_base == text["fileoff"] and exec_limit == text["filesize"], "the executable segment is not __TEXT")
    need(exec_flags == (CS_EXECSEG_MAIN_BINARY if filetype == MH_EXECUTE else 0), "execSegFlags %#x" % exec_flags)
    need(team_off == 0, "an ad-hoc signature names no team")
    end = sb.index(b"\0", cd_off + ident_off)
    identifier = sb[cd_off + ident_off:end].decode("utf-8")
    need(identifier, "empty identifier")
    need(hash_off >= n_special * hash_size and cd_off + hash_off + n_code * hash_size <= cd_off + cd_len, "hash slots outside the CodeDirectory")
    for i in range(n_code):
        want = sb[cd_off + hash_off + i * 32:cd_off + hash_off + (i + 1) * 32]
        got = hashlib.sha256(data[i * page:min((i + 1) * page, code_limit)]).digest()
        need(want == got, "page %d (bytes %d-%d) does not match its hash" % (i, i * page, min((i + 1) * page, code_limit)))
    cd = sb[cd_off:cd_off + cd_len]
    return {
        "ok": True, "identifier": identifier, "flags": flags, "version": version, "pages": n_code,
        "codeLimit": code_limit, "execSegBase": exec_base, "execSegLimit": exec_limit, "execSegFlags": exec_flags,
        "specialSlots": n_special, "platform": platform,
        # What `codesign -dvvv` calls CDHash: SHA-256 of the CodeDirectory, truncated to 20 bytes.
        "cdhash": hashlib.sha256(cd).hexdigest()[:40],
    }


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: macho_verify.py FILE\n")
        return 2
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    try:
        out = verify(data)
    except (Bad, struct.error, ValueError) as e:
        out = {"ok": False, "error": str(e)}
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
