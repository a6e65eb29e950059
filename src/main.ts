import { runCli } from "./cli/run.js";

runCli(process.argv.slice(2));
