// Loaded into a process under the bench with NODE_OPTIONS="--expose-gc --require <this file>" (B21):
// on SIGUSR2 it collects all garbage and writes process.memoryUsage() as JSON to the file that
// HEAP_PROBE_FILE names, so the bench reads the live heap of the real binary, not an estimate.
/* global require */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a --require preload is CommonJS
const { writeFileSync } = require("node:fs");

process.on("SIGUSR2", () => {
  for (let i = 0; i < 3; i++) globalThis.gc();
  writeFileSync(process.env.HEAP_PROBE_FILE, JSON.stringify(process.memoryUsage()));
});
