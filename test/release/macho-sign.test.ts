import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { goEnv } from "../../scripts/harness/go.js";
import { toolchain } from "../../scripts/harness/toolchain.js";

/**
 * The release's Mach-O signer (scripts/macho/sign.mjs), held to two references: Go's linker, which
 * writes an ad-hoc signature into every darwin/arm64 binary it links (cross-compiled from Linux
 * too), so a Go binary with its signature removed and signed again by ours must come back byte for
 * byte; and an independent verifier in another language (macho_verify.py), which recomputes every
 * page hash and checks the CodeDirectory's fields against the file.
 */
const go = toolchain("Go (Debian golang-go)", ["go", "version"]);
const python = toolchain("Python (Debian python3)", ["python3", "--version"]);
const SIGN = path.join(ROOT, "scripts/macho/sign.mjs");
const VERIFY = path.join(ROOT, "test/release/macho_verify.py");

let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "agui-macho-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function sign(...args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [SIGN, ...args], { encoding: "utf8" });
  return { status: r.status, stderr: r.stderr };
}

interface Verdict {
  ok: boolean;
  signed?: boolean;
  error?: string;
  identifier?: string;
  flags?: number;
  pages?: number;
  codeLimit?: number;
  execSegFlags?: number;
  cdhash?: string;
}

function verify(file: string): Verdict {
  const r = spawnSync("python3", [VERIFY, file], { encoding: "utf8" });
  const verdict = JSON.parse(r.stdout) as Verdict;
  expect(r.status, r.stderr).toBe(verdict.ok ? 0 : 1);
  return verdict;
}

/** A hello-world Go program cross-compiled for darwin/`arch`, offline. */
function goBinary(arch: "arm64" | "amd64"): string {
  const dir = path.join(tmp, `go-${arch}`);
  spawnSync("mkdir", ["-p", dir]);
  writeFileSync(path.join(dir, "go.mod"), "module hello\n\ngo 1.19\n");
  writeFileSync(path.join(dir, "main.go"), 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n');
  const exe = path.join(dir, "hello");
  const r = spawnSync("go", ["build", "-o", exe, "."], { cwd: dir, env: goEnv(dir, { GOOS: "darwin", GOARCH: arch, CGO_ENABLED: "0" }), encoding: "utf8", timeout: 600_000 });
  expect(r.status, r.stderr).toBe(0);
  return exe;
}

const both = go.available && python.available ? go.test : python.available ? python.test : go.test;

describe("the ad-hoc signer against Go's linker", () => {
  both("a Go darwin/arm64 binary, its signature removed and signed again by ours, is Go's own byte for byte", () => {
    const signedByGo = goBinary("arm64");
    const goVerdict = verify(signedByGo);
    expect(goVerdict).toMatchObject({ ok: true, identifier: "a.out", flags: 0x20002, execSegFlags: 1 });

    const bare = path.join(tmp, "bare");
    expect(sign("remove", signedByGo, bare).status).toBe(0);
    expect(verify(bare)).toMatchObject({ ok: false, signed: false });
    expect(readFileSync(bare).length).toBeLessThan(readFileSync(signedByGo).length);

    const ours = path.join(tmp, "ours");
    expect(sign("sign", "--identifier", "a.out", bare, ours).status).toBe(0);
    expect(Buffer.compare(readFileSync(ours), readFileSync(signedByGo))).toBe(0);
    expect(verify(ours).cdhash).toBe(goVerdict.cdhash);
  });

  both("signing a signed file replaces its signature: the same bytes as signing the bare file", () => {
    const signedByGo = goBinary("arm64");
    const again = path.join(tmp, "again");
    expect(sign("sign", "--identifier", "agui-state", signedByGo, again).status).toBe(0);
    const bare = path.join(tmp, "bare2");
    const fromBare = path.join(tmp, "from-bare");
    expect(sign("remove", signedByGo, bare).status).toBe(0);
    expect(sign("sign", "--identifier", "agui-state", bare, fromBare).status).toBe(0);
    expect(Buffer.compare(readFileSync(again), readFileSync(fromBare))).toBe(0);
    expect(verify(again)).toMatchObject({ ok: true, identifier: "agui-state" });
  });

  both("an x86-64 binary that Go leaves unsigned gets a load command and a signature the verifier accepts", () => {
    const unsigned = goBinary("amd64");
    expect(verify(unsigned)).toMatchObject({ ok: false, signed: false });
    const signed = path.join(tmp, "amd64-signed");
    expect(sign("sign", "--identifier", "hello", unsigned, signed).status).toBe(0);
    const v = verify(signed);
    expect(v).toMatchObject({ ok: true, identifier: "hello", flags: 0x20002, execSegFlags: 1 });
    expect(v.pages).toBe(Math.ceil((v.codeLimit ?? 0) / 4096));
  });

  // Go's bare binaries end on a 16-byte boundary (their signature started there), so the byte-for-byte
  // comparison never sees the padding; a --build-sea output may end anywhere. 1 to 15 bytes more in
  // __LINKEDIT, each time: the signature must start at the next 16-byte boundary, zeros before it.
  both("a binary whose __LINKEDIT ends off a 16-byte boundary is padded with zeros to one before the signature", () => {
    const bare = path.join(tmp, "bare-pad");
    expect(sign("remove", goBinary("arm64"), bare).status).toBe(0);
    const base = readFileSync(bare);
    expect(base.length % 16).toBe(0);
    for (const extra of [1, 5, 8, 15]) {
      const grown = Buffer.concat([base, Buffer.alloc(extra, 0xa5)]);
      const linkedit = segmentCommand(grown, "__LINKEDIT");
      grown.writeBigUInt64LE(grown.readBigUInt64LE(linkedit + 48) + BigInt(extra), linkedit + 48); // filesize
      const input = path.join(tmp, `grown-${extra}`);
      const out = path.join(tmp, `grown-${extra}-signed`);
      writeFileSync(input, grown);
      expect(sign("sign", "--identifier", "agui-state", input, out).status).toBe(0);
      const v = verify(out);
      expect(v, `${extra} bytes more`).toMatchObject({ ok: true, codeLimit: base.length + 16 });
      const signed = readFileSync(out);
      expect(signed.subarray(base.length, base.length + extra).equals(Buffer.alloc(extra, 0xa5)), "the file's own bytes kept").toBe(true);
      expect(signed.subarray(base.length + extra, base.length + 16).equals(Buffer.alloc(16 - extra)), "zeros up to the boundary").toBe(true);
    }
  });
});

/** The file offset of the LC_SEGMENT_64 command named `name` (<mach-o/loader.h>: segname at +8, 16 bytes). */
function segmentCommand(buf: Buffer, name: string): number {
  let at = 32;
  for (let i = 0; i < buf.readUInt32LE(16); i++) {
    if (buf.readUInt32LE(at) === 0x19 && buf.toString("latin1", at + 8, at + 24).replace(/\0+$/, "") === name) return at;
    at += buf.readUInt32LE(at + 4);
  }
  throw new Error(`no ${name} segment`);
}

describe("the verifier is not fooled", () => {
  both("one changed byte of code fails its page's hash; a wrong executable segment fails the CodeDirectory", () => {
    const signed = readFileSync(goBinary("arm64"));
    const code = Buffer.from(signed);
    code[0x5000] = (code[0x5000] ?? 0) ^ 0xff;
    const tampered = path.join(tmp, "tampered");
    writeFileSync(tampered, code);
    expect(verify(tampered)).toMatchObject({ ok: false, error: expect.stringMatching(/^page 5 /) as unknown });

    // execSegLimit is the CodeDirectory's 8-byte field at offset 72; the CodeDirectory starts 20
    // bytes into the SuperBlob, which starts at LC_CODE_SIGNATURE's dataoff (the file's last command).
    const seg = Buffer.from(signed);
    const sizeofcmds = seg.readUInt32LE(20);
    const dataoff = seg.readUInt32LE(32 + sizeofcmds - 16 + 8);
    seg.writeBigUInt64BE(seg.readBigUInt64BE(dataoff + 20 + 72) + 4096n, dataoff + 20 + 72);
    const wrongSeg = path.join(tmp, "wrong-seg");
    writeFileSync(wrongSeg, seg);
    expect(verify(wrongSeg)).toMatchObject({ ok: false, error: "the executable segment is not __TEXT" });
  });
});

describe("the signer refuses what it cannot sign, with the reason", () => {
  python.test("an ELF file, a universal binary and a missing identifier", () => {
    const elf = path.join(tmp, "elf");
    writeFileSync(elf, Buffer.concat([Buffer.from("\x7fELF", "latin1"), Buffer.alloc(60)]));
    const r1 = sign("sign", "--identifier", "x", elf, path.join(tmp, "o1"));
    expect(r1).toMatchObject({ status: 1, stderr: expect.stringContaining("not a 64-bit little-endian Mach-O") as unknown });
    const fat = path.join(tmp, "fat");
    writeFileSync(fat, Buffer.concat([Buffer.from([0xca, 0xfe, 0xba, 0xbe]), Buffer.alloc(60)]));
    expect(sign("sign", "--identifier", "x", fat).stderr).toContain("universal (fat) binary");
    expect(sign("sign", fat).status).toBe(2);
  });
});
