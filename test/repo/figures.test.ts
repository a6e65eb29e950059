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

  it("docs/benchmarks.md has the section the comments point to", () => {
    expect(readFileSync(path.join(ROOT, "docs/benchmarks.md"), "utf8")).toMatch(/^## Figures behind choices in the source$/m);
  });
});
