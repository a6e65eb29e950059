#!/usr/bin/env node
// The npm package's browser module, agui-state-sidecar/resume (protocol/README.md §16): src/web/resume
// as ES modules for browsers and bundlers, with its types. @ag-ui/client and rxjs stay imports (peer
// dependencies, never bundled): the page's own copy of the client is the one it extends.
//   dist/resume/index.js   resumableFetch and ResumableHttpAgent   (export "./resume")
//   dist/resume/fetch.js   resumableFetch alone, needing nothing   (export "./resume/fetch")
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(root, "src/web/resume");
const out = path.join(root, "dist/resume");

fs.rmSync(out, { recursive: true, force: true });
await esbuild.build({
  entryPoints: { index: path.join(src, "index.ts"), fetch: path.join(src, "resumable-fetch.ts") },
  outdir: out,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "browser",
  target: "es2020",
  external: ["@ag-ui/client", "rxjs"],
  chunkNames: "chunks/[name]-[hash]",
  legalComments: "none",
  logLevel: "warning",
});
// The types, from the same sources; tsc is the only declaration emitter that reads them as written.
const tsc = path.join(root, "node_modules/typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", path.join(src, "tsconfig.json"), "--noEmit", "false", "--declaration", "--emitDeclarationOnly", "--outDir", out], { stdio: "inherit" });
fs.copyFileSync(path.join(out, "resumable-fetch.d.ts"), path.join(out, "fetch.d.ts"));
