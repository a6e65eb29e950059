import { afterAll, beforeAll, describe, it } from "vitest";
import { EDGE_TABLE, playEdgeCase, startEdgeApp } from "../resume/edge-cases.js";
import { startProxy } from "./proxy-process.js";

/**
 * The resume edge's conformance table (test/fixtures/resume-edge/cases.json) through the real
 * binary's proxy, with its defaults (--store memory, --credential header:authorization), a proxy per
 * case (the harness ends each test's processes). The Python, Go and Clojure middleware suites play
 * the same table.
 */
let app: Awaited<ReturnType<typeof startEdgeApp>>;
beforeAll(async () => void (app = await startEdgeApp()));
afterAll(() => app.close());

describe("the resume edge through the proxy", () => {
  for (const c of EDGE_TABLE.cases) {
    it(`${c.name} (${c.why})`, async () => {
      const proxy = await startProxy(app.url, ["--log-level", "silent"]);
      await playEdgeCase(proxy.url, app.calls, c);
    });
  }
});
