import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, vi } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { goBuild } from "../../scripts/harness/go.js";
import { BINARY, start } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { noStreamLeft, readAll } from "./raise-run.js";

/**
 * Issue 41 (2), Go: a net/http handler (clients/go/examples/raiseagent) writes
 * N events, each flushed, and panics, with http.ErrAbortHandler or a plain
 * value; through aguistate.Middleware the real HttpAgent gets every one of
 * them, in order, with the state they carry, and then net/http's break, or
 * with Lifecycle "repair" the run's end and a clean end (raise-run.ts).
 */
const { test } = toolchain("Go (golang-go)", ["go", "version"]);

let tmp = "";
let exe = "";
// A response broken off: @ag-ui/client 1.0.0 (runHttpRequest) cancels the failed body's reader and rethrows
// what that cancel rejects with from a promise nobody holds, after the run already failed, at a moment of its
// own (as in go-lifecycle.test.ts). For this file's tests, such a cancel resolves.
let handled: { mockRestore: () => void } | undefined;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "agui-mw-go-raise-"));
  if (spawnSync("go", ["version"], { stdio: "ignore" }).status === 0) exe = goBuild(path.join(ROOT, "clients/go"), "./examples/raiseagent", tmp);
  const cancel = ReadableStreamDefaultReader.prototype.cancel;
  handled = vi.spyOn(ReadableStreamDefaultReader.prototype, "cancel").mockImplementation(function (this: ReadableStreamDefaultReader, reason?: unknown) {
    return cancel.call(this, reason).catch(() => undefined);
  });
}, 620_000);
afterAll(() => {
  handled?.mockRestore();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("a handler that panics after N events: every event reaches HttpAgent through the middleware, in order, then net/http's break (or repair's end); no stream is left open", async () => {
  const child = start({ name: "raiseagent", file: exe, args: [] }, [], { AGUI_STATE_BIN: BINARY });
  await child.until(() => child.stdout.includes("\n"), "the server's URL");
  const base = child.stdout.toString("utf8").trim();
  await readAll(base, "abort");
  // A plain panic value: net/http logs it and breaks the response off, as for ErrAbortHandler.
  await readAll(base, "plain", "&panic=plain");
  await noStreamLeft(base);
}, 600_000);
