import path from "node:path";
import { afterAll, beforeAll, vi } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, start } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { noStreamLeft, readAll } from "./raise-run.js";
import { JARS } from "./jetty.js";

/**
 * Issue 41 (2), Clojure: a Ring body (clients/clojure/test/agui_state/
 * ring_raise_agent.clj) writes N events, each flushed, and throws; through
 * wrap-agui-state in Jetty, with the one-argument handler and the async one,
 * the real HttpAgent gets every one of them, in order, with the state they
 * carry, and then Jetty's break, or with :lifecycle "repair" the run's end
 * and a clean end (raise-run.ts).
 */
const { test } = toolchain("Clojure + Ring + Jetty (clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", [
  "bash",
  "-c",
  `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`,
]);
/** A hang guard for the JVM's start, never an assertion. */
const START_MS = 110_000;

// A response broken off: @ag-ui/client 1.0.0 (runHttpRequest) rethrows its reader's cancel from a promise
// nobody holds, after the run already failed (as in clojure-lifecycle.test.ts): here that cancel resolves.
let handled: { mockRestore: () => void } | undefined;
beforeAll(() => {
  const cancel = ReadableStreamDefaultReader.prototype.cancel;
  handled = vi.spyOn(ReadableStreamDefaultReader.prototype, "cancel").mockImplementation(function (this: ReadableStreamDefaultReader, reason?: unknown) {
    return cancel.call(this, reason).catch(() => undefined);
  });
});
afterAll(() => handled?.mockRestore());

test("a body that throws after N events: every event reaches HttpAgent through the middleware (sync and async handlers), in order, then Jetty's break (or repair's end); no stream is left open", async () => {
  const classpath = [...JARS, path.join(ROOT, "clients/clojure/src"), path.join(ROOT, "clients/clojure/test")].join(":");
  const child = start({ name: "Jetty (ring_raise_agent.clj)", file: "clojure", args: ["-cp", classpath, "-m", "agui-state.ring-raise-agent"] }, [], { AGUI_STATE_BIN: BINARY });
  await child.until(() => /listening \S+ \S+\n/.test(child.stdout.toString("utf8")), "the Jetty servers to listen", START_MS);
  const [sync = "", async = ""] = (/listening (\S+) (\S+)/.exec(child.stdout.toString("utf8")) ?? []).slice(1);
  await readAll(sync, "sync");
  await readAll(async, "async");
  await noStreamLeft(sync);
}, 600_000);
