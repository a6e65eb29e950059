import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    // One kill registry for every child a test starts (scripts/harness/process.ts).
    setupFiles: ["scripts/harness/teardown.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The tests of broken-off answers (a reset, a panic, a raise) have @ag-ui/client 1.0.0 read a body
    // whose connection the server broke: its run fails, as asserted, and then runHttpRequest cancels
    // the errored body and rethrows what fetch rejects with ("terminated", from undici) from a promise
    // nobody holds, an unhandled rejection at a moment of its own. Only that one is let go, here, once,
    // rather than worked around in each file; every other unhandled error still fails the run.
    onUnhandledError: (error) => !(error.name === "TypeError" && error.message === "terminated" && (error.stack ?? "").includes("undici")),
  },
});
