import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { expect } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { childEnv } from "../../scripts/harness/process.js";
import { runProgram, toolchain } from "../../scripts/harness/toolchain.js";

/**
 * The pytest suites of clients/python/ drive the real binary through both
 * Python clients (AguiState and AsyncAguiState) and replay every event with
 * Debian's python3-jsonpatch, an implementation of RFC 6902 that shares no
 * code with ours. Debian's /usr/bin/python3, not whatever python3 is first on
 * PATH: that is where python3-jsonpatch, pytest and pytest-asyncio are.
 *
 * Each run is judged by its exit status and by pytest's summary line, which
 * must say that every test function in the files passed and nothing else: a
 * skipped, xfailed or uncollected test is not a passed one.
 */
const PYTHON = "/usr/bin/python3";
const clients = toolchain("Python (Debian python3-jsonpatch, python3-pytest, python3-pytest-asyncio)", [PYTHON, "-c", "import jsonpatch, pytest, pytest_asyncio"]);
const sse = toolchain("Python SSE example (Debian python3-starlette, python3-httpx)", [PYTHON, "-c", "import jsonpatch, pytest, pytest_asyncio, starlette, httpx"]);

/** How many test functions the suite's files define (none is parametrized, so each is one test). */
function testsIn(dir: string): number {
  return readdirSync(dir)
    .filter((f) => /^test_.*\.py$/.test(f))
    .reduce((n, f) => n + (readFileSync(path.join(dir, f), "utf8").match(/^(async )?def test_/gm) ?? []).length, 0);
}

function pytest(dir: string): void {
  // childEnv drops NODE_OPTIONS (vitest's loader hooks) and any AGUI_STATE_* settings of the caller.
  const env = childEnv({ AGUI_STATE_BIN: path.join(ROOT, "dist/agui-state"), PYTHONDONTWRITEBYTECODE: "1" });
  delete env["PYTHONPATH"]; // the suites import the package from clients/python/ themselves
  const args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", path.join(ROOT, dir)];
  const { status, stdout, output } = runProgram(PYTHON, args, { cwd: ROOT, env, timeout: 240_000 });
  expect(status, output).toBe(0);
  const summary = stdout.trim().split("\n").pop() ?? "";
  expect(summary, output).toMatch(/^\d+ passed in [\d.]+s/);
  expect(summary, "nothing skipped, xfailed, deselected or warned").not.toMatch(/skipped|xfail|xpass|deselected|warning|error/);
  expect(Number(summary.split(" ")[0]), "every test function ran").toBe(testsIn(path.join(ROOT, dir)));
}

clients.test("both Python clients play their scenarios against the real binary, witnessed by python3-jsonpatch", () => {
  pytest("clients/python/tests");
}, 250_000);

sse.test("the README's Starlette SSE server serves concurrent runs whose events apply", () => {
  pytest("clients/python/examples");
}, 250_000);
