import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import type { Run } from "../../scripts/harness/process.js";
import { itRunsAsInstalled, runInstalled, setUp, withoutNpm } from "./steps.js";

/**
 * The npm package as a user gets it: `npm pack` (which runs the prepack, a
 * bundle-only build) into a temporary folder, then `npm install -g --offline`
 * of that tarball into an empty prefix with an empty cache, from an empty
 * directory. It installs offline because it has no dependencies: the bundle
 * carries them. Then the installed `agui-state` is run: far from this
 * checkout, it could not borrow anything from node_modules/ here.
 */
const pkg = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { name: string; version: string };
const EXPECTED_FILES = ["CHANGELOG.md", "LICENSE", "README.md", "dist/agui-state.cjs", "package.json", "protocol/openrpc.json", ...["agent.d.ts", "announce.d.ts", "fetch.d.ts", "fetch.js", "index.d.ts", "index.js", "resumable-fetch.d.ts", "sse-blocks.d.ts"].map((f) => `dist/resume/${f}`)];
/** The browser module's shared code, split out by esbuild under a name with its hash. */
const CHUNK = /^package\/dist\/resume\/chunks\/chunk-[A-Z0-9]+\.js$/;
const MAX_BYTES = 2 * 1024 * 1024;
const SLOW = 300_000;

const work = mkdtempSync(path.join(tmpdir(), "agui-npm-package-"));
const prefix = path.join(work, "prefix");
const installed = path.join(prefix, "lib/node_modules", pkg.name);
const bin = path.join(prefix, "bin/agui-state");
let tarball = "";

/**
 * The environment for npm and the installed command: no npm_* settings from
 * an enclosing `npm test`, no NODE_PATH, and this node first on PATH (the
 * installed bin is the bundle, run by `#!/usr/bin/env node`).
 */
function env(): Record<string, string> {
  const e = withoutNpm(/^NODE_PATH$/);
  e["PATH"] = `${path.dirname(process.execPath)}${path.delimiter}${e["PATH"] ?? ""}`;
  return e;
}

const sh = (file: string, args: string[], cwd: string): string => setUp(file, args, cwd, env(), SLOW);

/** Runs the installed command from an empty directory, with `input` on stdin and this node first on PATH. */
const run = (args: string[], input: string): Run => runInstalled(bin, args, input, path.join(work, "cwd"), env());

beforeAll(() => {
  const packs = path.join(work, "pack");
  const cwd = path.join(work, "cwd");
  for (const d of [packs, cwd, prefix]) mkdirSync(d);
  const packed = JSON.parse(sh("npm", ["pack", "--json", "--pack-destination", packs], ROOT)) as { filename: string }[];
  tarball = path.join(packs, packed[0]?.filename ?? "");
  sh("npm", ["install", "-g", "--offline", "--no-audit", "--no-fund", "--no-update-notifier", "--prefix", prefix, "--cache", path.join(work, "cache"), tarball], cwd);
}, SLOW);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the npm package", () => {
  it("exports the resume module: resumableFetch loads with nothing else installed, and its types are beside it", () => {
    const fetchModule = path.join(installed, "dist/resume/fetch.js");
    const out = sh(process.execPath, ["--input-type=module", "-e", `const m = await import(${JSON.stringify(fetchModule)}); console.log(typeof m.resumableFetch, typeof m.resumableFetch()); `], work);
    expect(out.trim()).toBe("function function");
    const exported = (JSON.parse(readFileSync(path.join(installed, "package.json"), "utf8")) as { exports: Record<string, { types: string; default: string }> }).exports;
    for (const entry of ["./resume", "./resume/fetch"]) {
      expect(existsSync(path.join(installed, exported[entry]?.default ?? "missing"))).toBe(true);
      expect(existsSync(path.join(installed, exported[entry]?.types ?? "missing"))).toBe(true);
    }
  });

  it("holds exactly the bundle, the OpenRPC document, README, LICENSE, CHANGELOG and package.json", () => {
    expect(path.basename(tarball)).toBe(`${pkg.name}-${pkg.version}.tgz`);
    const listed = sh("tar", ["-tzf", tarball], work).split("\n").filter(Boolean).sort();
    expect(listed.filter((f) => !CHUNK.test(f))).toEqual(EXPECTED_FILES.map((f) => `package/${f}`).sort());
    expect(listed.filter((f) => CHUNK.test(f))).toHaveLength(1);
  });

  it("is under 2 MB", () => {
    expect(statSync(tarball).size).toBeLessThan(MAX_BYTES);
  });

  it("installs with no dependencies: nothing but the package itself", () => {
    const manifest = JSON.parse(readFileSync(path.join(installed, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
    expect(Object.keys(manifest.dependencies ?? {})).toEqual([]);
    expect(existsSync(path.join(installed, "node_modules"))).toBe(false);
  });

  // engines.node is the lowest Node the package supports (the bundle's esbuild target, build.mjs, is
  // the same); the installed command is run here on exactly that major: this machine's node, which
  // runs the release tests (CI's second, Node 26 pass leaves test/release out: .ci/run).
  it("declares engines.node >=20, and the installed command below runs on a node of that major", () => {
    const engines = (JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines.node;
    expect(engines).toBe(">=20");
    const r = runInstalled("node", ["--version"], "", path.join(work, "cwd"), env());
    expect(r.stdout.toString()).toMatch(/^v20\./);
  });

  itRunsAsInstalled(run, pkg.version);
});
