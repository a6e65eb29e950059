import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";

const dir = path.join(ROOT, "src/core");
const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));

describe("src/core is pure", () => {
  it("imports only its own modules: nothing from node:, a transport, a logger or the layers above", () => {
    let seen = 0;
    for (const f of files) {
      const text = readFileSync(path.join(dir, f), "utf8");
      const specifiers = [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["'];|\bimport\s*\(\s*["']([^"']+)["']/gm)].map((m) => m[1] ?? m[2]);
      seen += specifiers.length;
      for (const s of specifiers) expect(s, `${f} imports ${s}`).toMatch(/^\.\/[\w-]+\.js$/);
      expect(text, f).not.toMatch(/\b(require|process|console)\b/);
    }
    expect(seen).toBeGreaterThan(10);
  });
});
