import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * Each layer imports only the layers below it. The runtime-neutral code
 * (src/json, src/rpc/common, src/stream) touches no Node module, as
 * vscode-jsonrpc keeps its common/ apart from its node/; only src/rpc/node,
 * src/proxy, the logger and the command line do. The core is reached through
 * its public surface: its index, or its value module json.ts, which the index
 * re-exports whole. (src/core itself has its own, stricter test,
 * test/core/purity.test.ts: it imports nothing but its own modules.)
 *
 * From the bottom: core; protocol, store, json; resume (the run log, its ids
 * and its rules, shared by the proxy and the stream methods); edge (what a
 * request and an answer are to the repair, shared likewise); service;
 * rpc/common; rpc/node.
 * Beside them: stream (the client model that check and fix share), proxy (an
 * HTTP server around stream's fixer), runtime, log. At the top: cli, then
 * main. Neither stream nor proxy may reach rpc, service or cli.
 */
const CORE = String.raw`core\/(index|json)\.js`;
const LAYERS: Record<string, RegExp> = {
  "src/protocol": new RegExp(String.raw`^(\.\/[\w.-]+\.js|\.\.\/${CORE}|ajv(\/.*)?|vscode-jsonrpc)$`),
  "src/store": new RegExp(String.raw`^\.\.\/${CORE}$`),
  "src/json": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE})$`),
  "src/service": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE}|\.\.\/protocol\/[\w-]+\.js|\.\.\/(store|resume|edge)\/[\w-]+\.js|\.\.\/log\.js)$`),
  // The stream edge (protocol/README.md §14): which requests are handled, which answers are streams, the baseline; resume's header rules and the core's JSON only.
  "src/edge": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE}|\.\.\/resume\/edge\.js)$`),
  // Resume's run side (protocol/README.md §16): ids, the keyed credential hash, the stamper, the run log in memory or in Redis.
  // The announcement's name and value come from the browser module, which has no Node and says it to its fetch.
  "src/resume": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/(log|json\/stringify|stream\/events|web\/resume\/announce)\.js|node:crypto|node:stream|ioredis)$`),
  "src/rpc/common": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/\.\.\/(${CORE}|(json\/[\w-]+|log|protocol\/[\w.-]+|service\/[\w-]+)\.js)|vscode-jsonrpc|ajv)$`),
  // The heap ceiling and the heap's tuning: V8's statistics, flags and gc(), the log; they see the service only through an interface.
  "src/runtime": /^(node:(v8|vm)|\.\.\/log\.js|\.\/[\w-]+\.js)$/,
  // node:net and node:fs for serve --listen (protocol/README.md §2): its socket, and the socket file it claims.
  "src/rpc/node": /^(\.\/[\w-]+\.js|\.\.\/common\/[\w-]+\.js|\.\.\/\.\.\/(log|service\/[\w-]+)\.js|node:(buffer|stream|net|fs))$/,
  // The events' schemas and a JSON Patch applier to hold a client model to; no I/O.
  // The protocol's types only (a finding is the protocol's StreamFinding, held equal at compile time).
  "src/stream": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE}|\.\.\/protocol\/types\.js|@ag-ui\/core(\/schemas)?|fast-json-patch)$`),
  // An HTTP server around stream's fixer: its own options type, not the command line's; the inspector, loaded only with --inspect.
  "src/proxy": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE}|\.\.\/(log|stream\/[\w-]+|inspect\/[\w-]+|resume\/[\w-]+|edge\/[\w-]+)\.js|node:(events|http|https|net|stream|zlib))$`),
  // The inspector (issue 25): what the stream's observer saw, served over its own node:http listener; never the proxy or the command line.
  "src/inspect": new RegExp(String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE}|\.\.\/(log|stream\/[\w-]+)\.js|node:(events|http|net|crypto))$`),
  // The inspector's page runs in a browser: its own modules only, no Node, no library; and the API's types.
  "src/inspect/page": /^(\.\/[\w-]+\.js|\.\.\/api\.js)$/,
  // The browser module agui-state-sidecar/resume: its own modules, and @ag-ui/client (a peer dependency) with rxjs's types; no Node.
  "src/web/resume": /^(\.\/[\w-]+\.js|@ag-ui\/client|rxjs)$/,
  // The API's types, which the page and the store share: nothing, so the page's browser build stays free of Node.
  "src/inspect/api.ts": /^$/,
  // The top: flags, files and exit codes, wiring every layer below; the transport only through rpc/node.
  // `sarif` is @types/sarif, imported as types only (check --sarif's log shape), erased from the bundle.
  "src/cli": new RegExp(
    String.raw`^(\.\/[\w-]+\.js|\.\.\/${CORE}|\.\.\/(json|protocol|rpc\/node|runtime|service|stream|proxy|inspect|resume|edge)\/[\w-]+\.js|\.\.\/log\.js|\.\.\/\.\.\/package\.json|node:(fs|path|stream|url|util)|sarif)$`,
  ),
  // pino and its sink: the one place that writes to stderr.
  "src/log.ts": /^(\.\/log-sink\.js|pino|node:util)$/,
  "src/log-sink.ts": /^node:fs$/,
  "src/main.ts": /^\.\/cli\/run\.js$/,
};
/** Checked elsewhere (test/core/purity.test.ts). */
const OWN_TEST = ["src/core"];

const specifiers = (text: string): string[] =>
  [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+["']([^"']+)["'];|\bimport\s*\(\s*["']([^"']+)["']/gm)].map((m) => m[1] ?? m[2] ?? "");

/** The .ts files under a directory of src, or the one file a key names; as paths relative to ROOT. */
function sources(key: string): string[] {
  if (key.endsWith(".ts")) return [key];
  return readdirSync(path.join(ROOT, key))
    .filter((f) => f.endsWith(".ts"))
    .map((f) => `${key}/${f}`);
}

/** Every .ts file under src, relative to ROOT. */
function allSources(dir = "src"): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? allSources(`${dir}/${e.name}`) : e.name.endsWith(".ts") ? [`${dir}/${e.name}`] : [],
  );
}

describe("the layers stay in their rooms", () => {
  for (const [key, allowed] of Object.entries(LAYERS)) {
    it(`${key} imports only what its layer may`, () => {
      const files = sources(key);
      expect(files.length).toBeGreaterThan(0);
      for (const f of files) {
        for (const s of specifiers(readFileSync(path.join(ROOT, f), "utf8"))) expect(s, `${f} imports ${s}`).toMatch(allowed);
      }
    });
  }

  it("has a rule for every source file: a new directory of src/ needs one", () => {
    const ruled = new Set([...Object.keys(LAYERS), ...OWN_TEST]);
    const files = allSources();
    expect(files.length).toBeGreaterThan(50);
    for (const f of files) expect(ruled.has(f) || ruled.has(path.posix.dirname(f)), `${f} is under no layer rule`).toBe(true);
  });

  it("keeps Node's globals out of the runtime-neutral code", () => {
    for (const dir of ["src/json", "src/rpc/common", "src/stream"]) {
      for (const f of readdirSync(path.join(ROOT, dir)).filter((x) => x.endsWith(".ts"))) {
        expect(readFileSync(path.join(ROOT, dir, f), "utf8"), `${dir}/${f}`).not.toMatch(/\bBuffer\b(?!-)|\bprocess\.|\brequire\(|\bNodeJS\./);
      }
    }
  });
});
