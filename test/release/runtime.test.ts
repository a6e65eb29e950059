import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY } from "../../scripts/harness/process.js";
import pin from "../../scripts/node-runtime.json" with { type: "json" };
import { withoutNpm } from "./steps.js";

/**
 * The runtime under every binary (issue 33): dist/agui-state, the binary every process test spawns
 * and the release ships for this machine, runs on the Node pinned in scripts/node-runtime.json, and
 * that Node comes from a tarball whose integrity is the one recorded there, or the build stops.
 */
const work = mkdtempSync(path.join(tmpdir(), "agui-runtime-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function cacheDir(): string {
  if (process.env["AGUI_STATE_NODE_CACHE"]) return path.resolve(process.env["AGUI_STATE_NODE_CACHE"]);
  return path.join(process.env["XDG_CACHE_HOME"] || path.join(homedir(), ".cache"), "agui-state", "node");
}

describe("the runtime the binaries embed", () => {
  it(`dist/agui-state runs on Node ${pin.version}, the pinned one`, () => {
    // A SEA still reads NODE_OPTIONS: a --require'd file prints the runtime's version, then the
    // sidecar answers --version as always.
    const probe = path.join(work, "print-version.cjs");
    writeFileSync(probe, 'process.stderr.write(`runtime ${process.version}\\n`);\n');
    const r = spawnSync(BINARY, ["--version"], { env: { ...withoutNpm(), NODE_OPTIONS: `--require ${probe}` }, encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toBe(`runtime v${pin.version}\n`);
  });

  it("dist/agui-state starts with the V8 flags node-runtime.json gives every binary (execArgv)", () => {
    const probe = path.join(work, "print-exec-argv.cjs");
    writeFileSync(probe, "process.stderr.write(JSON.stringify(process.execArgv.filter((a) => !a.startsWith('--require'))) + '\\n');\n");
    const r = spawnSync(BINARY, ["--version"], { env: { ...withoutNpm(), NODE_OPTIONS: `--require ${probe}` }, encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stderr)).toEqual(expect.arrayContaining(pin.execArgv));
    expect(pin.execArgv).toContain("--max-semi-space-size=16");
  });

  it("this machine's pinned tarball is the one node-runtime.json records (sha512, as the registry's dist.integrity)", () => {
    const host = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}` as keyof typeof pin.packages;
    const { npm, integrity } = pin.packages[host];
    const tarball = path.join(cacheDir(), `${npm}-${pin.version}.tgz`);
    expect(existsSync(tarball), `${tarball}, fetched by the build`).toBe(true);
    expect(`sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`).toBe(integrity);
  });

  it("a cached tarball that is not the recorded one stops the build's fetch, naming both integrities", () => {
    const host = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}` as keyof typeof pin.packages;
    const { npm, integrity } = pin.packages[host];
    const cache = path.join(work, "cache");
    const tarball = path.join(cache, `${npm}-${pin.version}.tgz`);
    spawnSync("mkdir", ["-p", cache]);
    copyFileSync(path.join(cacheDir(), `${npm}-${pin.version}.tgz`), tarball);
    const bytes = readFileSync(tarball);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    writeFileSync(tarball, bytes);
    const r = spawnSync(process.execPath, [path.join(ROOT, "scripts/pinned-node.mjs")], { env: { ...withoutNpm(), AGUI_STATE_NODE_CACHE: cache }, encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`scripts/node-runtime.json records ${integrity}`);
    expect(existsSync(path.join(cache, `${npm}-${pin.version}`)), "nothing unpacked from it").toBe(false);
  });

  it("--cached, as the bench asks, fetches nothing: without the build's tarball it fails and names the cache", () => {
    const host = `${process.platform === "win32" ? "win" : process.platform}-${process.arch}` as keyof typeof pin.packages;
    const { npm } = pin.packages[host];
    const cache = mkdtempSync(path.join(work, "empty-cache-"));
    // No npm on PATH either: a fetch would fail otherwise, and differently.
    const r = spawnSync(process.execPath, [path.join(ROOT, "scripts/pinned-node.mjs"), "--cached"], { env: { ...withoutNpm(), AGUI_STATE_NODE_CACHE: cache, PATH: work }, encoding: "utf8" });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(`the Node the binary embeds (${npm}@${pin.version}) is not in ${cache}, and this run fetches nothing`);
    expect(readdirSync(cache), "nothing fetched or unpacked").toEqual([]);
  });
});
