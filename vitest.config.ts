import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    // One kill registry for every child a test starts (scripts/harness/process.ts).
    setupFiles: ["scripts/harness/teardown.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
