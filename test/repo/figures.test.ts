import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * Issue 22 §6: a timing measured once and written into a source comment goes
 * stale with the code around it. The comment keeps the reason; the figure
 * lives in docs/benchmarks.md ("Figures behind choices in the source"), where
 * it is corrected in one place.
 */
const TIMING = /\d(?:[.,]\d+)?\s?(?:µs|ns)\b|\bmicroseconds?\b|\bnanoseconds?\b/i;

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) return sources(rel);
    return /\.(ts|mjs|js)$/.test(e.name) && !e.name.includes(".generated.") ? [rel] : [];
  });
}

describe("source comments carry no timing figures", () => {
  it("src/ and scripts/ name no microseconds or nanoseconds", () => {
    const files = [...sources("src"), ...sources("scripts")];
    expect(files.length).toBeGreaterThan(50);
    for (const f of files) {
      const hits = readFileSync(path.join(ROOT, f), "utf8")
        .split("\n")
        .flatMap((line, i) => (TIMING.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : []));
      expect(hits, "move the figure to docs/benchmarks.md and point there").toEqual([]);
    }
  });

  it("src/ and protocol/README.md justify nothing by a benchmark's id: the reason in words, the figure in docs/benchmarks.md (issue 39)", () => {
    // B1, B8, B19r, B22py: the ids of bench/results.md's rows.
    const BENCH_ID = /\bB\d{1,2}[a-z]{0,3}\b/;
    const files = [...sources("src"), "protocol/README.md"];
    const hits = files.flatMap((f) =>
      readFileSync(path.join(ROOT, f), "utf8")
        .split("\n")
        .flatMap((line, i) => (BENCH_ID.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(hits, "say why in words, and put the bench id and its figure in docs/benchmarks.md").toEqual([]);
    expect(BENCH_ID.test("the pool (bench B19r)")).toBe(true);
    expect(BENCH_ID.test("base64url, B-tree, AB12")).toBe(false);
  });

  it("docs/benchmarks.md has the section the comments point to", () => {
    expect(readFileSync(path.join(ROOT, "docs/benchmarks.md"), "utf8")).toMatch(/^## Figures behind choices in the source$/m);
  });
});
