import path from "node:path";
import { afterAll, beforeAll, vi } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, start } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { noStreamLeft, readAll } from "./raise-run.js";

/**
 * Issue 41 (2), Python: a FastAPI app under uvicorn (clients/python/examples/
 * raise_server.py) writes N events and raises; through AguiStateMiddleware
 * the real HttpAgent gets every one of them, in order, with the state they
 * carry, and then uvicorn's break, or with lifecycle="repair" the run's end
 * and a clean end (raise-run.ts).
 */
const PYTHON = "/usr/bin/python3";
const { test } = toolchain("Python middleware (Debian python3-fastapi, python3-starlette, python3-uvicorn)", [PYTHON, "-c", "import fastapi, starlette, uvicorn"]);
const SERVER = path.join(ROOT, "clients/python/examples/raise_server.py");

// A response broken off: @ag-ui/client 1.0.0 (runHttpRequest) rethrows its reader's cancel from a promise
// nobody holds, after the run already failed (as in python-resume.test.ts): here that cancel resolves.
let handled: { mockRestore: () => void } | undefined;
beforeAll(() => {
  const cancel = ReadableStreamDefaultReader.prototype.cancel;
  handled = vi.spyOn(ReadableStreamDefaultReader.prototype, "cancel").mockImplementation(function (this: ReadableStreamDefaultReader, reason?: unknown) {
    return cancel.call(this, reason).catch(() => undefined);
  });
});
afterAll(() => handled?.mockRestore());

test("an app that raises after N events: every event reaches HttpAgent through the middleware, in order, then uvicorn's break (or repair's end); no stream is left open", async () => {
  const child = start({ name: "uvicorn (raise_server.py)", file: PYTHON, args: [SERVER] }, [], { AGUI_STATE_BIN: BINARY, PYTHONDONTWRITEBYTECODE: "1" });
  await child.until(() => /listening on \d+\n/.test(child.stdout.toString("utf8")), "the server to listen", 30_000);
  const base = `http://127.0.0.1:${/listening on (\d+)/.exec(child.stdout.toString("utf8"))?.[1] ?? ""}`;
  await readAll(base, "raise");
  await noStreamLeft(base);
}, 600_000);
