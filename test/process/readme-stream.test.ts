import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, childEnv } from "../../scripts/harness/process.js";

/**
 * The README's "For a server you cannot change" shows a captured stream, what
 * `check` prints for it and what `fix` writes. Its three ```text blocks are
 * run here against the real binary, so the section cannot drift.
 */
const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
const section = readme.slice(readme.indexOf("## For a server you cannot change"), readme.indexOf("## In a shell pipeline"));
const [input, checked, fixed] = [...section.matchAll(/^```text\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
const work = mkdtempSync(path.join(tmpdir(), "agui-readme-stream-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the README's captured stream", () => {
  it("has the input, check's findings and fix's output", () => {
    expect([input, checked, fixed].every((b) => b !== undefined && b.length > 0)).toBe(true);
  });

  it("check prints exactly the findings the README shows, and exits 1", () => {
    writeFileSync(path.join(work, "run.sse"), input as string);
    const r = spawnSync(BINARY, ["check", "run.sse"], { cwd: work, env: childEnv(), encoding: "utf8", timeout: 20_000 });
    expect(r.stdout).toBe(checked);
    expect(r.status).toBe(1);
  });

  it("fix writes exactly the stream the README shows, and exits 0", () => {
    writeFileSync(path.join(work, "run.sse"), input as string);
    const r = spawnSync(BINARY, ["fix", "run.sse"], { cwd: work, env: childEnv(), encoding: "utf8", timeout: 20_000 });
    expect(r.stdout).toBe(fixed);
    expect(r.status).toBe(0);
  });
});
