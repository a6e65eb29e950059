import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect } from "vitest";
import { ROOT } from "../harness/fixtures.js";
import { childEnv } from "../harness/process.js";
import { runProgram, toolchain } from "../harness/toolchain.js";

/**
 * clients/go/client_test.go drives the real binary through the Go client and
 * replays every event with Debian's github.com/evanphx/json-patch, an RFC 6902
 * implementation that shares no code with ours. There is no module proxy
 * here, so it builds offline in GOPATH mode against /usr/share/gocode.
 */
const GOPATH = "/usr/share/gocode";
const { test } = toolchain("Go (golang-go + evanphx/json-patch)", [
  "bash",
  "-c",
  `command -v go && test -d ${GOPATH}/src/github.com/evanphx/json-patch`,
]);

test("the Go client plays the scenario against the real binary, witnessed by evanphx/json-patch", () => {
  const cache = mkdtempSync(path.join(os.tmpdir(), "agui-go-cache-"));
  // childEnv drops NODE_OPTIONS (vitest's loader hooks) and any AGUI_STATE_* settings of the caller.
  const env = childEnv({
    GO111MODULE: "off",
    GOPATH,
    GOCACHE: cache,
    AGUI_STATE_BIN: path.join(ROOT, "dist/agui-state"),
  });
  delete env["GOFLAGS"]; // e.g. -mod=... is refused in GOPATH mode
  let result: ReturnType<typeof runProgram>;
  try {
    result = runProgram("go", ["test", "-count=1", "-v", "."], { cwd: path.join(ROOT, "clients/go"), env, timeout: 300_000 });
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
  const { status, stdout, output } = result;
  expect(status, output).toBe(0);
  expect(stdout).toMatch(/^PASS$/m);
  expect(stdout).toMatch(/^--- PASS: TestCrashRecovery /m);
  expect(stdout, "a skipped Go test is not a passed one").not.toMatch(/SKIP/);
}, 310_000);
