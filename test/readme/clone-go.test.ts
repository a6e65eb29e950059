import { toolchain } from "../../scripts/harness/toolchain.js";
import { describeScenario, freshClone, readerEnv } from "./describe.js";

/**
 * The README's Go path in a fresh clone of the committed HEAD: `npm run build`,
 * a module beside the clone with the README's `require` and `replace`, and the
 * net/http middleware run with `go run` offline, as shown.
 */
const tools = toolchain("Go (Debian golang-go) and curl", ["bash", "-c", "command -v curl && go version"]);
describeScenario("go", tools.test, tools.available, (work) => {
  const clone = freshClone(work);
  return { docs: clone, cwd: clone, env: readerEnv(work) };
});
