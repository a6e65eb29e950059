#!/usr/bin/env node
// Prints the path of the pinned Node (scripts/node-runtime.json) for this machine, unpacked in the
// cache folder from its npm tarball once the integrity is checked (sea-targets.mjs), fetching it on
// first use. .ci/run puts its folder first on PATH to run the in-process suite on the runtime the
// binaries embed; the bench runs it beside them, with --cached: the one the build left in the cache,
// or a failure that says so, never a fetch in the middle of a measurement.
//   node scripts/pinned-node.mjs [--cached]
import { HOST, pinnedNode } from "./sea-targets.mjs";

try {
  process.stdout.write(`${pinnedNode(HOST, process.env, { fetch: !process.argv.includes("--cached") })}\n`);
} catch (err) {
  console.error(`[pinned-node] FAILED: ${err.message}`);
  process.exit(1);
}
