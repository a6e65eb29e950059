import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../harness/fixtures.js";

/**
 * Each layer imports only the layers below it. The runtime-neutral code
 * (src/json, src/rpc/common) touches no Node module and no stream code, as
 * vscode-jsonrpc keeps its common/ apart from its node/; only src/rpc/node
 * and the command line do. (src/core has its own, stricter test.)
 */
const LAYERS: Record<string, RegExp> = {
  "src/protocol": /^(\.\/[\w.-]+\.js|\.\.\/core\/index\.js|ajv(\/.*)?|vscode-jsonrpc)$/,
  "src/store": /^\.\.\/core\/index\.js$/,
  "src/json": /^(\.\/[\w-]+\.js|\.\.\/core\/index\.js)$/,
  "src/service": /^(\.\/[\w-]+\.js|\.\.\/core\/index\.js|\.\.\/protocol\/[\w-]+\.js|\.\.\/store\/[\w-]+\.js)$/,
  "src/rpc/common": /^(\.\/[\w-]+\.js|\.\.\/\.\.\/(core\/index|json\/[\w-]+|log|protocol\/[\w.-]+|service\/[\w-]+)\.js|vscode-jsonrpc|ajv)$/,
  // The heap ceiling: V8's statistics and its gc(), the log; it sees the service only through an interface.
  "src/runtime": /^(node:(v8|vm)|\.\.\/log\.js)$/,
  "src/rpc/node": /^(\.\/[\w-]+\.js|\.\.\/common\/[\w-]+\.js|\.\.\/\.\.\/(log|service\/[\w-]+)\.js|node:(buffer|stream))$/,
};

const specifiers = (text: string): string[] =>
  [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["'];|\bimport\s*\(\s*["']([^"']+)["']/gm)].map((m) => m[1] ?? m[2] ?? "");

describe("the layers stay in their rooms", () => {
  for (const [dir, allowed] of Object.entries(LAYERS)) {
    it(`${dir} imports only what its layer may`, () => {
      const files = readdirSync(path.join(ROOT, dir)).filter((f) => f.endsWith(".ts"));
      expect(files.length).toBeGreaterThan(0);
      for (const f of files) {
        for (const s of specifiers(readFileSync(path.join(ROOT, dir, f), "utf8"))) expect(s, `${dir}/${f} imports ${s}`).toMatch(allowed);
      }
    });
  }

  it("keeps Node's globals out of the runtime-neutral code", () => {
    for (const dir of ["src/json", "src/rpc/common"]) {
      for (const f of readdirSync(path.join(ROOT, dir)).filter((x) => x.endsWith(".ts"))) {
        expect(readFileSync(path.join(ROOT, dir, f), "utf8"), `${dir}/${f}`).not.toMatch(/\bBuffer\b(?!-)|\bprocess\.|\brequire\(|\bNodeJS\./);
      }
    }
  });
});
