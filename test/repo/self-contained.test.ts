import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";

/** Folders that are built, installed or versioned, never written by hand. */
const SKIP = new Set(["node_modules", "dist", ".git", "coverage", "__pycache__"]);

function* projectFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* projectFiles(full);
    else if (entry.isFile() && statSync(full).size < 8 * 1024 * 1024) yield full;
  }
}

const files = [...projectFiles(ROOT)].map((f) => ({ rel: path.relative(ROOT, f), text: readFileSync(f, "utf8") }));

// Spelt in pieces, so this file does not match itself.
const OUTSIDE = ["..", "shared"].join("/");
const OLD_CONTRACT = new RegExp(["PROTOCOL", "(\\.md)?\\s*§|", "NOTES", "\\.md"].join(""));

describe("the repository stands on its own", () => {
  it("reads enough of the tree to mean something", () => {
    expect(files.length).toBeGreaterThan(50);
    expect(files.map((f) => f.rel)).toContain(path.join("test", "fixtures", "json-patch-tests", "tests.json"));
  });

  it("no file reads or names the folder beside the clone", () => {
    expect(files.filter((f) => f.text.includes(OUTSIDE)).map((f) => f.rel)).toEqual([]);
  });

  it("no file cites a contract document outside the repository", () => {
    expect(files.filter((f) => OLD_CONTRACT.test(f.text)).map((f) => f.rel)).toEqual([]);
  });

  it("every `protocol/README.md §n` citation names a section that exists", () => {
    const contract = readFileSync(path.join(ROOT, "protocol/README.md"), "utf8");
    const sections = new Set([...contract.matchAll(/^## (\d+)\./gm)].map((m) => m[1]));
    expect(sections.size).toBeGreaterThanOrEqual(11);
    let cited = 0;
    for (const f of files) {
      for (const m of f.text.matchAll(/protocol\/README\.md\s*§\s*(\d+)/g)) {
        cited++;
        expect(sections.has(m[1] ?? ""), `${f.rel} cites §${m[1]}`).toBe(true);
      }
    }
    expect(cited).toBeGreaterThan(10);
  });
});
