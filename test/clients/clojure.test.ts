import path from "node:path";
import { expect } from "vitest";
import { ROOT } from "../harness/fixtures.js";
import { childEnv } from "../harness/process.js";
import { runProgram, toolchain } from "../harness/toolchain.js";

/**
 * clients/clojure/test/run_tests.clj drives the real binary through the Clojure
 * client in one JVM: namespace mode over two runs, model-style applyOps and its
 * errors, diffState, concurrent callers, and a killed sidecar with restart and
 * resync. Its witness is getState, against states computed by hand and a strict
 * replay of every forwarded event. Debian's clojure and libdata-json-clojure,
 * with an explicit classpath: no dependency resolution, no network.
 */
const { test } = toolchain("Clojure (clojure + libdata-json-clojure)", [
  "bash",
  "-c",
  "command -v clojure && test -f /usr/share/java/data.json.jar",
]);

test("the Clojure client plays its scenarios against the real binary, witnessed by getState", () => {
  const binary = path.join(ROOT, "dist/agui-state");
  // childEnv drops NODE_OPTIONS (vitest's loader hooks) and any AGUI_STATE_* settings of the caller.
  const r = runProgram("clojure", ["-cp", "/usr/share/java/data.json.jar:clients/clojure/src", "clients/clojure/test/run_tests.clj"], {
    cwd: ROOT,
    env: childEnv({ AGUI_STATE_BIN: binary }),
    timeout: 300_000,
  });
  expect(r.status, r.output).toBe(0);
  expect(r.stdout).toMatch(/^clojure client: \d+ checks passed/m);
}, 310_000);
