// `npm run demo`: plays a two-run session of a namespace-mode thread against
// the real dist/agui-state (test/demo/two-runs.ts), prints the wire one event
// per line and the checks; exits 1 if any check fails.
//
//   npx tsx scripts/demo.ts
import { runDemo } from "../test/demo/two-runs.js";

process.exitCode = await runDemo((line) => console.log(line));
