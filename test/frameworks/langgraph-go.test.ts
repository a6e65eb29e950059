import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { goBuild } from "../../scripts/harness/go.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { middlewareSuite } from "./middleware.js";
import { fixtureDir } from "./replay.js";

/**
 * Real LangGraph answers (test/fixtures/frameworks/langgraph/) replayed by a
 * net/http handler behind aguistate.Middleware (Own: the fixture's own;
 * clients/go/examples/replayagent), into the real HttpAgent. The middleware
 * logs a line for each stream it could not repair (it fails open) and each
 * restart of the sidecar; its findings, counted by outcome, are the only
 * lines a clean replay may log.
 */
const go = toolchain("Go (golang-go)", ["go", "version"]);
let tmp = "";
let exe = "";
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "agui-frameworks-go-"));
  if (go.available) exe = goBuild(path.join(ROOT, "clients/go"), "./examples/replayagent", tmp);
}, 620_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

middlewareSuite(
  "langgraph",
  {
    name: "aguistate.Middleware (net/http)",
    command: () => ({ file: exe, args: ["-fixtures", fixtureDir("langgraph")] }),
    urls: (out) => (out.includes("\n") ? { "": out.trim() } : undefined),
    complaints: (stderr) => stderr.split("\n").filter((l) => l !== "" && !/^agui-state: \S+: findings: /.test(l)),
  },
  go,
);
