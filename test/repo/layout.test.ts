import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * What a user runs (`npm run demo`, `fuzz`, `soak`, `bench`) lives beside the
 * script that runs it, and tests import it, never the other way round (issue 22
 * §6): a reader looking for the demo must not find it among the tests, and
 * deleting `test/` must leave every entry point whole.
 */

/** Folders that are built, installed or versioned, never written by hand. */
const SKIP = new Set(["node_modules", "dist", ".git", "coverage", "__pycache__"]);
const CODE = /\.(?:[cm]?ts|[cm]?js)$/;

function* codeFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* codeFiles(full);
    else if (entry.isFile() && CODE.test(entry.name)) yield full;
  }
}

// Every way a module names another: `import … from`, `export … from`, a bare
// `import "x"`, `import("x")` and `require("x")`.
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)(["'])([^"'\n]+)\1/g;

/** The files under test/ that `text`, the source of `file`, imports. */
function importsFromTest(file: string, text: string): string[] {
  const testDir = path.join(ROOT, "test") + path.sep;
  const found: string[] = [];
  for (const m of text.matchAll(SPECIFIER)) {
    const spec = m[2] ?? "";
    if (!spec.startsWith(".") && !path.isAbsolute(spec)) continue;
    const target = path.resolve(path.dirname(file), spec);
    if (target.startsWith(testDir)) found.push(path.relative(ROOT, target));
  }
  return found;
}

const outside = [...codeFiles(ROOT)].filter((f) => !path.relative(ROOT, f).startsWith(`test${path.sep}`));

describe("nothing outside test/ imports from test/", () => {
  it("the check sees an import into test/ in every form it names, and only those", () => {
    const file = path.join(ROOT, "scripts", "x.ts");
    const text = [
      `import { a } from "../test/harness/peer.js";`,
      `export { b } from '../test/fuzz/run.js';`,
      `import "../test/global-setup.js";`,
      `const c = await import("../test/soak/driver.js");`,
      `const d = require("../test/demo/two-runs.js");`,
      `import { e } from "./harness/peer.js";`,
      `import { f } from "../src/core/index.js";`,
      `import { g } from "vitest";`,
      `// a comment naming test/harness/ is not an import`,
    ].join("\n");
    expect(importsFromTest(file, text)).toEqual([
      "test/harness/peer.js",
      "test/fuzz/run.js",
      "test/global-setup.js",
      "test/soak/driver.js",
      "test/demo/two-runs.js",
    ].map((p) => p.split("/").join(path.sep)));
  });

  it("reads the entry points, the harness and the benchmarks", () => {
    const rel = outside.map((f) => path.relative(ROOT, f).split(path.sep).join("/"));
    for (const must of ["scripts/demo.ts", "scripts/fuzz.ts", "scripts/soak.ts", "scripts/harness/process.ts", "bench/run.ts", "vitest.config.ts"]) {
      expect(rel).toContain(must);
    }
  });

  it("no file outside test/ imports a module under test/", () => {
    const offenders = outside.flatMap((f) =>
      importsFromTest(f, readFileSync(f, "utf8")).map((t) => `${path.relative(ROOT, f)} -> ${t}`),
    );
    expect(offenders).toEqual([]);
  });
});

describe("docs/contributing.md's layout names every folder of src/", () => {
  const guide = readFileSync(path.join(ROOT, "docs", "contributing.md"), "utf8");
  const layout = guide.slice(guide.indexOf("\n## Layout\n"));
  const folders = readdirSync(path.join(ROOT, "src"), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);

  it("reads the section and the folders", () => {
    expect(layout.startsWith("\n## Layout\n")).toBe(true);
    expect(folders).toContain("core");
  });

  it("has a line for each, so a new folder comes with one", () => {
    expect(folders.filter((f) => !layout.includes(`\`src/${f}/\``))).toEqual([]);
  });
});
