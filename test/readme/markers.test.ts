import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { allBlocks, markerProblems, parseBlocks, SCENARIOS, steps } from "./blocks.js";

/**
 * The README convention (test/readme/blocks.ts): every block of README.md and
 * docs/*.md says how it is run, so none escapes the tests, and the README keeps
 * the shape issue 31 asks for: short, the paths before any install detail, and
 * each path's one line taken from a block that runs.
 */
const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
const blocks = allBlocks();

describe("the convention's parser", () => {
  it("finds a block with its marker, and a block without one", () => {
    const text = "intro\n<!-- readme: start run -->\n```sh\nnpm ci\n```\n\n```python\nprint(1)\n```\n";
    const found = parseBlocks("X.md", text);
    expect(found.map((b) => [b.line, b.lang, b.body, b.marker])).toEqual([
      [3, "sh", "npm ci\n", ["start", "run"]],
      [7, "python", "print(1)\n", []],
    ]);
    expect(markerProblems(found)).toEqual(["X.md:7: a ```python block with no <!-- readme: ... --> marker before it"]);
  });

  it("refuses a show without a reason, an unknown scenario, an output after nothing it belongs to", () => {
    const text = [
      "<!-- readme: show -->", "```sh", "x", "```",
      "<!-- readme: nowhere run -->", "```sh", "x", "```",
      "<!-- readme: start output -->", "```text", "x", "```",
      "<!-- readme: start serve 80 -->", "```sh", "x", "```",
      "",
    ].join("\n");
    expect(markerProblems(parseBlocks("X.md", text))).toEqual([
      'X.md:2: "show" needs a reason why the block cannot run',
      'X.md:6: unknown scenario "nowhere"',
      "X.md:10: an output block must come right after a run or serve block of its scenario",
      "X.md:14: a serve block starts its servers with a line ending in &",
    ]);
  });
});

describe("README.md and docs/*.md", () => {
  it("have blocks, and every block is marked", () => {
    expect(blocks.filter((b) => b.file === "README.md").length).toBeGreaterThan(10);
    expect(markerProblems(blocks)).toEqual([]);
  });

  it("every scenario the convention names has blocks", () => {
    for (const s of SCENARIOS) expect(steps(blocks, s).length, s).toBeGreaterThan(0);
  });

  it("every command of a `ci` block is a line of .ci/run", () => {
    const ci = readFileSync(path.join(ROOT, ".ci/run"), "utf8").split("\n").map((l) => l.trim());
    const marked = blocks.filter((b) => b.marker[0] === "ci");
    expect(marked.length).toBeGreaterThan(0);
    for (const b of marked) {
      for (const line of b.body.split("\n").filter(Boolean)) {
        for (const part of line.replace(/\s+#.*$/, "").split("&&").map((p) => p.trim())) expect(ci, `${b.file}:${b.line}: ${part}`).toContain(part);
      }
    }
  });
});

describe("the README's shape (issue 31)", () => {
  it("is at most 250 lines", () => {
    expect(readme.replace(/\n$/, "").split("\n").length).toBeLessThanOrEqual(250);
  });

  it("puts the path table above the first block", () => {
    const table = readme.indexOf("## Pick your path");
    expect(table).toBeGreaterThan(0);
    expect(table).toBeLessThan(readme.indexOf("```"));
  });

  it("each path's one line is in a block the tests run", () => {
    const section = readme.slice(readme.indexOf("## Pick your path"), readme.indexOf("\n## ", readme.indexOf("## Pick your path") + 1));
    const rows = section.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| you have") && !l.startsWith("| ---"));
    expect(rows.map((r) => r.split("|")[1]?.trim())).toEqual([
      "a Python ASGI server (FastAPI, Starlette)",
      "a Go `net/http` server",
      "a Clojure Ring app",
      "a server you cannot change",
      "your own state writes",
      "CI",
    ]);
    const run = blocks.filter((b) => b.file === "README.md" && (SCENARIOS as readonly string[]).includes(b.marker[0] ?? "")).map((b) => b.body).join("\n");
    // The code of each row's last cell; the typed client's call (your own state writes) is run by
    // clients/python/tests/test_sync.py, on a thread opened as the README's sidecar.py opens it.
    const lines = rows.map((r) => /`([^`]+)` \|$/.exec(r)?.[1] ?? "");
    expect(lines.every(Boolean)).toBe(true);
    for (const line of lines.filter((l) => !l.startsWith("s.diff_tool_state"))) {
      expect(run, line).toContain(line);
    }
  });

  it("names the Node the binaries embed and every release target, as scripts/node-runtime.json pins them (issue 33)", () => {
    const runtime = JSON.parse(readFileSync(path.join(ROOT, "scripts/node-runtime.json"), "utf8")) as { version: string; packages: Record<string, unknown> };
    const line = readme.split("\n").find((l) => l.startsWith("- [docs/install.md]")) ?? "";
    expect(line).toContain(`Node ${runtime.version}`);
    const named = [...line.matchAll(/\b((?:linux|win|darwin)-(?:x64|arm64))\b/g)].map((m) => m[1]);
    expect(named.sort()).toEqual(Object.keys(runtime.packages).sort());
    expect(line).toContain("not run on a Mac");
  });
});
