import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * No module of src/ reaches itself through its imports (issue 39). A circle
 * makes the order modules load in decide what a reader sees (a class still
 * undefined at the import), and it hides which of two files is the lower one;
 * test/rpc/layers.test.ts orders the folders, and this holds the files within
 * them. Every import counts: static, `export … from`, dynamic and type-only,
 * since a circle of types ties two modules' meanings together all the same.
 * The imports are read by TypeScript's own pre-processor, not a pattern.
 */

type Graph = ReadonlyMap<string, readonly string[]>;

/** Every .ts and .js file under `dir`, relative to ROOT, with "/" between folders. */
function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(`${dir}/${e.name}`) : /\.[cm]?[jt]s$/.test(e.name) ? [`${dir}/${e.name}`] : [],
  );
}

/** The file a relative specifier names: `./x.js` is written for x.ts (and x.d.ts beside a generated x.js). */
function resolve(from: string, spec: string, known: ReadonlySet<string>): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const base = path.posix.join(path.posix.dirname(from), spec);
  const stem = base.replace(/\.[cm]?js$/, "");
  return [`${stem}.ts`, base, `${stem}.d.ts`].find((c) => known.has(c));
}

/** The graph of src/'s files, each to the files of src/ it imports. */
function importGraph(files: readonly string[]): Graph {
  const known = new Set(files);
  return new Map(
    files.map((f) => {
      const { importedFiles } = ts.preProcessFile(readFileSync(path.join(ROOT, f), "utf8"), true, true);
      const to = importedFiles.flatMap((i) => resolve(f, i.fileName, known) ?? []);
      return [f, [...new Set(to)]];
    }),
  );
}

/** The graph's circles: each strongly connected set of more than one file, or a file that imports itself (Tarjan). */
function cycles(graph: Graph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next += 1;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = w === v ? undefined : stack.pop()) {
      onStack.delete(w);
      set.push(w);
    }
    if (set.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(set.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe("no import cycle in src/", () => {
  it("the check finds a circle of two, of three and a self-import, and nothing in a chain", () => {
    const graph = new Map([
      ["a", ["b"]],
      ["b", ["a", "c"]],
      ["c", ["d"]],
      ["d", ["e"]],
      ["e", ["c"]],
      ["f", ["f"]],
      ["g", ["h"]],
      ["h", []],
    ]);
    expect(cycles(graph).sort()).toEqual([["a", "b"], ["c", "d", "e"], ["f"]]);
  });

  it("reads every kind of import, and resolves `.js` to the source beside it", () => {
    const known = new Set(["src/a.ts", "src/b.ts", "src/c.ts", "src/d.ts", "src/x/e.ts", "src/g.generated.js"]);
    const text = [
      `import { a } from "./a.js";`,
      `import type { B } from "./b.js";`,
      `export { c } from "./c.js";`,
      `const d = await import("./d.js");`,
      `import {\n  e,\n} from "./x/e.js";`,
      `import { g } from "./g.generated.js";`,
      `import { h } from "node:fs";`,
      `// import { z } from "./z.js";`,
    ].join("\n");
    const specs = ts.preProcessFile(text, true, true).importedFiles.map((i) => resolve("src/m.ts", i.fileName, known));
    expect(specs).toEqual(["src/a.ts", "src/b.ts", "src/c.ts", "src/d.ts", "src/x/e.ts", "src/g.generated.js", undefined]);
  });

  it("src/ has none", () => {
    const graph = importGraph(sources("src"));
    expect(graph.size).toBeGreaterThan(100);
    // The graph is not empty of edges: the check sees the imports it guards.
    expect([...graph.values()].flat().length).toBeGreaterThan(200);
    expect(cycles(graph).map((c) => c.join(" <-> "))).toEqual([]);
  });
});
