#!/usr/bin/env node
// Builds dist/agui-state.cjs (a self-contained CJS bundle, runnable with
// `node`) and dist/agui-state (a Node Single Executable Application), offline:
// the SEA base is the running node binary, nothing is downloaded.
//   node scripts/build.mjs [--entry path/to/entry.ts] [--bundle-only]
// --bundle-only stops after the bundle (well under a second; npm's prepack uses it)
// and leaves dist/agui-state and the SEA files alone.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");
const bundle = path.join(dist, "agui-state.cjs");
const seaConfig = path.join(dist, "sea-config.json");
const blob = path.join(dist, "sea-prep.blob");
const binary = path.join(dist, "agui-state");
// Built under a temporary name and renamed at the end: a process spawning
// dist/agui-state meanwhile never meets a half-written file (ETXTBSY).
const binaryTmp = `${binary}.${process.pid}.tmp`;
// The same for the bundle: tests spawn `node dist/agui-state.cjs` while npm's
// prepack (npm pack, in a test too) rebuilds it.
const bundleTmp = `${bundle}.${process.pid}.tmp`;
// Fixed by Node: the string postject flips so node knows a blob is injected.
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

const args = process.argv.slice(2);
const bundleOnly = args.includes("--bundle-only");
const entryAt = args.findIndex((a) => a === "--entry" || a.startsWith("--entry="));
const entry = entryAt < 0 ? path.join(root, "src/main.ts")
  : path.resolve(args[entryAt].includes("=") ? args[entryAt].slice(8) : args[entryAt + 1] ?? "");

const t0 = performance.now();
async function step(name, fn) {
  const t = performance.now();
  try {
    await fn();
  } catch (err) {
    // esbuild has already printed its diagnostics; a stack adds nothing.
    console.error(`[build] FAILED: ${name}${err.errors ? "" : `\n${err.stderr ?? ""}${err.message}`}`);
    process.exit(1);
  }
  console.error(`[build] ${name} (${Math.round(performance.now() - t)} ms)`);
}

// The old binary stays in place until the new one is renamed over it, so a
// process spawned during a build always finds a whole file. A failed build
// leaves it older than the sources, and ensure-built.mjs rebuilds next time.
// A bundle-only build never touches them: a full build may be using them.
if (!bundleOnly) for (const f of [seaConfig, blob]) fs.rmSync(f, { force: true });
fs.mkdirSync(dist, { recursive: true });

// The inspector's page (src/inspect/page/, issue 25): compiled for the
// browser first, then carried in the bundle as one string constant, so the
// page needs no file beside the binary. Plain TypeScript and the DOM, no
// front-end library: nothing to download, and a few KB in the bundle.
let inspectorJs = "";
await step("esbuild src/inspect/page/main.ts -> the inspector's page script", async () => {
  const page = await esbuild.build({
    entryPoints: [path.join(root, "src/inspect/page/main.ts")],
    bundle: true,
    write: false,
    format: "iife",
    platform: "browser",
    target: "es2022",
    minify: true,
    legalComments: "none",
    logLevel: "warning",
  });
  inspectorJs = page.outputFiles[0].text;
  // It goes inline in a <script> element: a "</script" in it would end it early.
  if (/<\/script/i.test(inspectorJs)) throw new Error("the inspector's page script contains </script");
});

/** An esbuild plugin that bundles each named optional module as an empty one. */
function absent(names) {
  const filter = new RegExp(`^(${names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|")})$`);
  return {
    name: "absent",
    setup(build) {
      build.onResolve({ filter }, (args) => ({ path: args.path, namespace: "absent" }));
      build.onLoad({ filter: /.*/, namespace: "absent" }, () => ({ contents: "module.exports = {};", loader: "js" }));
    },
  };
}

await step(`esbuild ${path.relative(root, entry)} -> dist/agui-state.cjs`, () =>
  esbuild.build({
    entryPoints: [entry],
    outfile: bundleTmp,
    bundle: true, // no externals: the SEA's require() only knows builtins
    format: "cjs", // SEA main scripts must be CommonJS in Node 20
    platform: "node",
    target: "node20",
    // Minified: the stream commands brought zod and @ag-ui/core's schemas into
    // the bundle (0.48 MB to 1.09 MB), and the binary's first response went
    // from 1.41x to 1.55x `node -e 0` (B8). Minified, it parses and loads its
    // code cache faster (1.43x in the same run). Not keepNames: it cost the
    // margin back in our measurements.
    minify: true,
    sourcemap: false,
    legalComments: "none",
    logLevel: "warning",
    // CJS has no import.meta; esbuild would silently turn it into `{}`.
    // Map import.meta.url to a file URL of the running file (in the SEA,
    // __filename is process.execPath) and make any other import.meta use
    // (dirname, resolve, ...) a hard error rather than `undefined` at runtime.
    define: { "import.meta.url": "__importMetaUrl", __AGUI_INSPECTOR_JS__: JSON.stringify(inspectorJs) },
    // ioredis's `debug` asks for supports-color inside a try, which the SEA's require() answers with a
    // warning on stderr; it is not installed, so it is bundled as the empty module it would be missing as.
    plugins: [absent(["supports-color"])],
    logOverride: { "empty-import-meta": "error" },
    // The shebang makes the .cjs runnable on its own; Node's SEA loader
    // strips it like the CJS loader does (verified on v20.20.2).
    banner: {
      js: '#!/usr/bin/env node\nvar __importMetaUrl = require("node:url").pathToFileURL(__filename).href;',
    },
  }),
);
fs.chmodSync(bundleTmp, 0o755);
fs.renameSync(bundleTmp, bundle);
await step("esbuild src/web/resume -> dist/resume (the agui-state-sidecar/resume module)", () => import("./build-resume.mjs"));

if (bundleOnly) {
  console.error(`[build] done in ${Math.round(performance.now() - t0)} ms (bundle only)`);
  process.exit(0);
}

await step("node --experimental-sea-config -> dist/sea-prep.blob", () => {
  // Paths in the config are resolved against cwd, hence cwd: root below.
  const config = {
    main: "dist/agui-state.cjs",
    output: "dist/sea-prep.blob",
    disableExperimentalSEAWarning: true,
    // V8 code cache of the bundle's top level, made by this same node so V8
    // accepts it (SEA flags=5 when injected); it shortens start-up, by the
    // figure in docs/benchmarks.md, "Figures behind choices in the source".
    useCodeCache: true,
  };
  fs.writeFileSync(seaConfig, JSON.stringify(config, null, 2) + "\n");
  // node says "Wrote single executable..." on stderr; keep it only on error.
  execFileSync(process.execPath, ["--experimental-sea-config", seaConfig], {
    cwd: root,
    stdio: "pipe",
    // A --require/--import hook from the caller's NODE_OPTIONS (tsx, vitest)
    // must not run in, or shape the code cache of, the blob generator.
    env: { ...process.env, NODE_OPTIONS: "" },
  });
});

await step(`copy ${process.execPath} -> dist/agui-state`, () => {
  fs.copyFileSync(process.execPath, binaryTmp);
  fs.chmodSync(binaryTmp, 0o755);
});

// Full `strip` is safe for node: addons link against .dynsym, which strip
// keeps; only .symtab and the debug sections go (this machine's v20.20.2:
// 98.9 MB -> 86.3 MB; --strip-debug only gets to 96.4 MB). The stripped SEA
// was verified to run, same startup time. It runs before postject so the
// injected note is never touched. No strip on the machine: skip it.
await step("strip dist/agui-state", () => {
  try {
    execFileSync("strip", [binaryTmp], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    if (err.code !== "ENOENT") throw err;
    console.error("[build] strip not found, binary left unstripped");
  }
});

await step("postject NODE_SEA_BLOB -> dist/agui-state", async () => {
  // The JS API rather than the CLI: no extra process, no colored stdout.
  const { inject } = createRequire(import.meta.url)("postject");
  // postject's LIEF (wasm) warns via console.warn once per ELF note it can't
  // name; this node has 256+ notes, so ~12 harmless lines, stripped or not.
  const warn = console.warn;
  console.warn = (...a) => /Can't find string offset for section name/.test(String(a[0])) || warn(...a);
  try {
    await inject(binaryTmp, "NODE_SEA_BLOB", fs.readFileSync(blob), { sentinelFuse: SEA_FUSE });
  } finally {
    console.warn = warn;
  }
  fs.chmodSync(binaryTmp, 0o755);
  fs.renameSync(binaryTmp, binary);
});

const mb = (fs.statSync(binary).size / 1024 / 1024).toFixed(1);
console.error(`[build] done in ${Math.round(performance.now() - t0)} ms: dist/agui-state is ${mb} MB`);
