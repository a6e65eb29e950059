import { toolchain } from "../../scripts/harness/toolchain.js";
import { describeScenario, freshClone, readerEnv } from "./describe.js";

/**
 * The README's `start` scenario in a fresh clone of the committed HEAD: `npm ci
 * && npm run demo`, then the proxy, the standard-library Python client and
 * `check`, as shown, with nothing built before.
 */
const tools = toolchain("python3 and curl", ["bash", "-c", "command -v curl && /usr/bin/python3 -c 'import json, subprocess'"]);
describeScenario("start", tools.test, tools.available, (work) => {
  const clone = freshClone(work);
  return { docs: clone, cwd: clone, env: readerEnv(work) };
});
