import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { expect } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { childEnv } from "../../scripts/harness/process.js";
import { runProgram, toolchain } from "../../scripts/harness/toolchain.js";
import { JARS } from "../middleware/jetty.js";

/**
 * clients/clojure/test/ holds clojure.test namespaces that drive the real binary
 * through the Clojure client: namespace mode over two runs, model-style applyOps
 * and its errors, diffState (nil sent as null), concurrent callers, a killed
 * sidecar with restart and resync, restart's close timeout, the pointer, stats
 * and rpc.discover wrappers, the activities of protocol/README.md §10 (created,
 * patched, retyped, snapshotted with replace false, -32005, resynchronized after
 * a restart, dropped by closeThread and eviction), deps.edn and the README's two
 * examples. Their witness is getState (getActivity), against values computed by
 * hand and a strict RFC 6902 replay of every forwarded event; and the Ring
 * middleware (agui-state.ring), whose output is held to `agui-state fix`'s.
 * Debian's clojure (clojure.main, which reads no deps.edn), libdata-json-clojure
 * and Ring (libring-core-clojure; the Jetty adapter for the agent namespace that
 * test/middleware/clojure.test.ts serves), with an explicit classpath: no
 * dependency resolution, no network.
 */
const { test } = toolchain("Clojure (clojure + libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", [
  "bash",
  "-c",
  `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`,
]);

const CLIENT = path.join(ROOT, "clients/clojure");
const TEST_DIR = path.join(CLIENT, "test/agui_state");

/** Each *_test.clj file's namespace and its number of deftests, read from the source. */
function testFiles(): { ns: string; deftests: number }[] {
  return readdirSync(TEST_DIR)
    .filter((f) => f.endsWith("_test.clj"))
    .map((f) => {
      const text = readFileSync(path.join(TEST_DIR, f), "utf8");
      const ns = /^\(ns\s+([\w.-]+)/m.exec(text)?.[1] ?? `(no ns form in ${f})`;
      return { ns, deftests: (text.match(/^\(deftest\s/gm) ?? []).length };
    });
}

test("the Clojure client's clojure.test suite passes against the real binary, witnessed by getState and getActivity", () => {
  const binary = path.join(ROOT, "dist/agui-state");
  const classpath = [...JARS, "clients/clojure/src", "clients/clojure/test"].join(":");
  // childEnv drops NODE_OPTIONS (vitest's loader hooks) and any AGUI_STATE_* settings of the caller;
  // AGUI_STATE_BIN is set again so that the test of start's default path has something to run.
  const r = runProgram("clojure", ["-cp", classpath, "-m", "agui-state.test-runner", binary], {
    cwd: ROOT,
    env: childEnv({ AGUI_STATE_BIN: binary }),
    timeout: 300_000,
  });
  expect(r.status, r.output).toBe(0);

  const summary = /^Ran (\d+) tests containing (\d+) assertions\.\n(\d+) failures, (\d+) errors\.$/m.exec(r.stdout);
  expect(summary, r.output).not.toBeNull();
  const [tests, assertions, failures, errors] = (summary ?? []).slice(1).map(Number);
  expect({ failures, errors }, r.output).toEqual({ failures: 0, errors: 0 });

  // Every test file's namespace ran, and every deftest in it: a namespace left
  // out of the runner's list, or a deftest shadowed by a duplicate name, fails here.
  const files = testFiles();
  expect(files.length).toBeGreaterThanOrEqual(4);
  for (const { ns } of files) expect(r.stdout, r.output).toContain(`Testing ${ns}\n`);
  expect(tests).toBe(files.reduce((n, f) => n + f.deftests, 0));
  // A floor under today's count (about 490, some 160 of them activities): deftests that stop
  // asserting anything, or an activity test cut back to a stub, fail here.
  expect(assertions).toBeGreaterThanOrEqual(420);
}, 310_000);
