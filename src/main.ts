import { parseServeArgs, UsageError } from "./cli/options.js";
import { runServer } from "./serve.js";

try {
  runServer(parseServeArgs(process.argv.slice(2), process.env));
} catch (e) {
  if (!(e instanceof UsageError)) throw e;
  process.stderr.write(`agui-state: ${e.message}\n`);
  process.exit(2);
}
