// `npm run demo`: plays a two-run session of a namespace-mode thread against
// the real dist/agui-state (scripts/demo/two-runs.ts), prints the wire (each
// AG-UI event it forwards, in order, one compact JSON per line, after the call
// that returned it) and the checks; exits 1 if any check fails.
//
//   npx tsx scripts/demo.ts
import { runDemo } from "./demo/two-runs.js";

process.exitCode = await runDemo((line) => console.log(line));
