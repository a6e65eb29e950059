import path from "node:path";
import { expect } from "vitest";
import { ROOT } from "../harness/fixtures.js";
import { childEnv } from "../harness/process.js";
import { runProgram, toolchain } from "../harness/toolchain.js";

/**
 * clients/python/test_client.py drives the real binary through the Python
 * client and replays every event with Debian's python3-jsonpatch, an
 * implementation of RFC 6902 that shares no code with ours. Debian's
 * /usr/bin/python3, not whatever python3 is first on PATH: that is where
 * python3-jsonpatch is installed.
 */
const { test } = toolchain("Python (Debian python3-jsonpatch)", ["/usr/bin/python3", "-c", "import jsonpatch"]);

test("the Python client plays the namespace scenario against the real binary, witnessed by python3-jsonpatch", () => {
  const script = path.join(ROOT, "clients/python/test_client.py");
  const binary = path.join(ROOT, "dist/agui-state");
  // childEnv drops NODE_OPTIONS (vitest's loader hooks) and any AGUI_STATE_* settings of the caller.
  const { status, stdout, output } = runProgram("/usr/bin/python3", [script, binary], { cwd: ROOT, env: childEnv(), timeout: 120_000 });
  expect(status, output).toBe(0);
  expect(stdout).toMatch(/^python client: \d+ checks passed/m);
}, 130_000);
