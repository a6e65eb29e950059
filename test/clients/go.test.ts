import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { runProgram, toolchain } from "../../scripts/harness/toolchain.js";
import { goEnv as offlineGo } from "../../scripts/harness/go.js";

/**
 * clients/go is two Go modules, built here as a user builds them: in module
 * mode, offline, from their go.mod files alone.
 *
 * - clients/go, the client (standard library only): its API against the real
 *   binary, activities (protocol/README.md §10) included, where -32601 is a
 *   failure; the README's example (example_test.go, output checked), and a
 *   stand-in sidecar for replies a correct one never sends.
 * - clients/go/witness, tests only: every event, state and activity, replayed
 *   with Debian's github.com/evanphx/json-patch, an RFC 6902 implementation that
 *   shares no code with ours and checked against getState and getActivity, and
 *   the kill -9 crash recovery. Its go.mod reaches every dependency through a
 *   replace to a local directory, which needs no proxy and no go.sum
 *   (clients/go/README.md, "Tests").
 */
const JSON_PATCH = "/usr/share/gocode/src/github.com/evanphx/json-patch";
const { test } = toolchain("Go (golang-go + evanphx/json-patch)", [
  "bash",
  "-c",
  `command -v go && test -f ${JSON_PATCH}/go.mod`,
]);

const CLIENT = path.join(ROOT, "clients/go");

let tmp = "";
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "agui-go-"));
});
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** The go command's environment (scripts/harness/go.ts: module mode, offline, every cache in tmp), with the binary under test. */
function goEnv(): NodeJS.ProcessEnv {
  return offlineGo(tmp, { AGUI_STATE_BIN: path.join(ROOT, "dist/agui-state") });
}

/** Every file under dir and its content: what the go command must leave as it found it. */
function snapshot(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    files.set(path.relative(dir, file), readFileSync(file, "utf8"));
  }
  return files;
}

/** The tests and examples a module's test files declare (TestMain runs them, it is not one). */
function declaredTests(dir: string): string[] {
  const names: string[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith("_test.go"))) {
    for (const m of readFileSync(path.join(dir, file), "utf8").matchAll(/^func (Test\w*|Example\w*)\(/gm)) {
      if (m[1] !== "TestMain") names.push(m[1] as string);
    }
  }
  return names;
}

/** go vet, then go test, in one module; every declared test must pass, none skip. */
function goVetAndTest(module: string, dir: string, mustPass: string[]): void {
  const env = goEnv();
  const before = snapshot(CLIENT);
  const vet = runProgram("go", ["vet", "./..."], { cwd: dir, env, timeout: 300_000 });
  expect(vet.status, `go vet in ${dir}\n${vet.output}`).toBe(0);
  const { status, stdout, output } = runProgram("go", ["test", "-count=1", "-v", "./..."], { cwd: dir, env, timeout: 300_000 });
  expect(status, output).toBe(0);
  expect(stdout).toMatch(new RegExp(`^ok\\s+${module.replace(/[.]/g, "\\.")}\\s`, "m"));
  expect(stdout, "a skipped Go test is not a passed one").not.toMatch(/SKIP/);
  const declared = declaredTests(dir);
  expect(declared).toEqual(expect.arrayContaining(mustPass));
  for (const name of declared) expect(stdout, `${name} must run and pass`).toMatch(new RegExp(`^--- PASS: ${name} `, "m"));
  // -mod=mod may rewrite go.mod or write go.sum when they are incomplete: they are not, and nothing else is written either.
  expect(snapshot(CLIENT), "the go command wrote into clients/go").toEqual(before);
}

test("the Go client module: its API and the README's example against the real binary, standard library only", () => {
  const mustPass = ["Example", "TestNullValue", "TestNullOnTheWire", "TestEveryMethodHasAWrapper", "TestWireFollowsDiscover", "TestReadmeIsTheExample"];
  goVetAndTest("github.com/agui-state/agui-state/clients/go", CLIENT, [...mustPass, "TestActivities", "TestActivitiesAfterRestart"]);
}, 620_000);

test("the Go witness module: every state and activity event replayed with evanphx/json-patch, and the kill -9 recovery", () => {
  goVetAndTest("github.com/agui-state/agui-state/clients/go/witness", path.join(CLIENT, "witness"), ["TestCrashRecovery", "TestNullReplay", "TestActivityReplay", "TestActivityCrashRecovery"]);
}, 620_000);
