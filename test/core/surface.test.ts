import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import * as core from "../../src/core/index.js";
import { JsonDocument, decodeOps, type Writer } from "../../src/core/index.js";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * Issue 23 §6: the core's engine is not an API. A document is held and
 * patched through JsonDocument (apply, transaction); the engine behind it
 * (src/core/apply.ts: the Doc record with its byte count, nesting bound and
 * undo log, mark and rollback) and the per-op rules (normalize.ts,
 * patch.ts) stay inside src/core. Outside it, code reaches the core through
 * src/core/index.ts, or a module the index re-exports whole (and so is
 * public in full). test/core, the engine's own suite, may test it white-box.
 */

const SCANNED = ["src", "bench", "scripts", "test"];
const WHITE_BOX = [path.join(ROOT, "src/core"), path.join(ROOT, "test/core")];
const CORE = path.join(ROOT, "src/core");

/** The engine's names, which the index must not export. */
const INTERNALS = ["newDoc", "applyOp", "applyNormalized", "applyAtomic", "applyLenient", "mark", "rollback", "NO_LIMITS", "leavesAsIs", "locate", "walkTo"];

function files(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (/\.(ts|mts|mjs)$/.test(name)) out.push(p);
  }
  return out;
}

/** Every module specifier a file imports, re-exports or mocks. */
const specifiers = (text: string): string[] =>
  [...text.matchAll(/\bfrom\s+["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']|\bvi\.mock\(\s*["']([^"']+)["']/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? "");

/** The core's modules a file may import: the index, and those it re-exports whole (`export *`). */
function publicModules(): Set<string> {
  const index = readFileSync(path.join(CORE, "index.ts"), "utf8");
  const whole = [...index.matchAll(/^export \* from "\.\/([\w-]+)\.js";$/gm)].map((m) => path.join(CORE, `${m[1]}.js`));
  return new Set([path.join(CORE, "index.js"), ...whole]);
}

/** The core's modules that `file` imports and may not. */
function reaches(file: string, text: string, allowed: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const s of specifiers(text)) {
    if (!s.startsWith(".")) continue;
    const target = path.resolve(path.dirname(file), s);
    if (target.startsWith(CORE + path.sep) && !allowed.has(target)) out.push(s);
  }
  return out;
}

describe("the core's public surface", () => {
  it("exports the document object and none of the engine's internals", () => {
    const names = Object.keys(core);
    expect(names).toContain("JsonDocument");
    expect(names.filter((n) => INTERNALS.includes(n))).toEqual([]);
    // The engine's modules are not re-exported whole.
    expect(publicModules()).not.toContain(path.join(CORE, "apply.js"));
    expect(publicModules()).not.toContain(path.join(CORE, "normalize.js"));
    expect(publicModules()).not.toContain(path.join(CORE, "patch.js"));
  });

  it("the check finds an import of the engine: it is not a test that cannot fail", () => {
    const allowed = publicModules();
    const file = path.join(ROOT, "src/stream/example.ts");
    expect(reaches(file, 'import { mark, rollback } from "../core/apply.js";', allowed)).toEqual(["../core/apply.js"]);
    expect(reaches(file, 'vi.mock("../core/normalize.js", () => ({}));', allowed)).toEqual(["../core/normalize.js"]);
    expect(reaches(file, 'import { JsonDocument } from "../core/index.js";\nimport type { Json } from "../core/json.js";', allowed)).toEqual([]);
  });

  it("nothing outside src/core (and the engine's own tests) imports the engine", () => {
    const allowed = publicModules();
    let seen = 0;
    const offenders: string[] = [];
    for (const dir of SCANNED) {
      for (const file of files(path.join(ROOT, dir))) {
        if (WHITE_BOX.some((w) => file.startsWith(w + path.sep))) continue;
        const text = readFileSync(file, "utf8");
        if (text.includes("core/")) seen++;
        for (const s of reaches(file, text, allowed)) offenders.push(`${path.relative(ROOT, file)} imports ${s}`);
      }
    }
    expect(offenders).toEqual([]);
    // The scan reached the core's callers: the service, the stream, the bench, the tests.
    expect(seen).toBeGreaterThan(30);
  });

  it("a transaction that fails leaves the document as it was, byte count included; one that succeeds keeps its ops", () => {
    const doc = new JsonDocument({ a: [1], keep: "x" });
    const bytes = doc.bytes;
    const failed = doc.transaction((w) => {
      expect(w.apply({ op: "add", path: ["a", "-"], value: 2 })).toBeUndefined();
      expect(w.apply({ op: "add", path: ["b"], value: { big: "y".repeat(100) } })).toBeUndefined();
      expect(w.root).toEqual({ a: [1, 2], keep: "x", b: { big: "y".repeat(100) } });
      return { ok: false, error: "undo" } as const;
    });
    expect(failed).toEqual({ ok: false, error: "undo" });
    expect(doc.root).toEqual({ a: [1], keep: "x" });
    expect(doc.bytes).toBe(bytes);

    const applied: unknown[] = [];
    const kept = doc.transaction((w) => ({ ok: true, value: w.apply({ op: "add", path: ["notes", "-"], value: "n" }, applied as never) }) as const);
    expect(kept).toEqual({ ok: true, value: undefined });
    // §5 rule 2: the missing array was created first, and both ops are reported.
    expect(applied).toEqual([
      { op: "add", path: ["notes"], value: [] },
      { op: "add", path: ["notes", "-"], value: "n" },
    ]);
    expect(doc.root).toEqual({ a: [1], keep: "x", notes: ["n"] });
  });

  it("a body that throws rolls back, and the document refuses changes beside an open transaction", () => {
    const doc = new JsonDocument({ a: 1 });
    expect(() =>
      doc.transaction((w) => {
        w.apply({ op: "replace", path: ["a"], value: 2 });
        throw new Error("boom");
      }),
    ).toThrow("boom");
    expect(doc.root).toEqual({ a: 1 });
    let escaped: Writer | undefined;
    doc.transaction((w) => {
      escaped = w;
      expect(() => doc.applyAtomic(decodeOps([{ op: "remove", path: "/a" }]))).toThrow(/in a transaction/);
      return { ok: true, value: undefined };
    });
    expect(() => escaped?.apply({ op: "remove", path: ["a"] })).toThrow(/after the transaction ended/);
    expect(doc.root).toEqual({ a: 1 });
  });
});
