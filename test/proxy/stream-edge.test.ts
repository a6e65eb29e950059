import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startProxy } from "./proxy-process.js";

/**
 * The stream edge's conformance table (test/fixtures/stream-edge/cases.json, protocol/README.md §14)
 * through the real binary's proxy: which answers are event streams, the head a repaired answer goes
 * out with, the body kept for the baseline. The Python, Go and Clojure middleware suites play the
 * same table against the sidecar, which follows the same rules (src/edge/).
 */
interface Side {
  method: string;
  path: string;
  headers: [string, string][];
  body?: string;
  pad?: number;
}
interface StreamEdgeCase {
  name: string;
  options?: { paths?: string[]; resume?: boolean; store?: string; sidecar?: string };
  request: Side;
  response: { status: number; headers: [string, string][]; body: string };
  expect: { app: boolean; status: number; body?: string; ids?: "strip"; headers?: Record<string, string | null>; appBody?: "same"; error?: string };
  runners?: string[];
}
const TABLE = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, "../fixtures/stream-edge/cases.json"), "utf8")) as { sidecarArgs: string[]; cases: StreamEdgeCase[] };
const OURS = TABLE.cases.filter((c) => c.runners === undefined || c.runners.includes("proxy"));

/** The table's app: answers each request with the case named in its x-case header, and notes what it read. */
let app: { url: string; seen: Map<string, string>; close: () => Promise<void> };
beforeAll(async () => {
  const seen = new Map<string, string>();
  const server = http.createServer((req, res) => {
    const c = TABLE.cases.find((x) => x.name === req.headers["x-case"]);
    const chunks: Buffer[] = [];
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("end", () => {
      if (c === undefined) return void res.writeHead(404).end();
      seen.set(c.name, Buffer.concat(chunks).toString("utf8"));
      res.writeHead(c.response.status, c.response.headers.flat());
      res.end(c.response.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  app = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, close: () => new Promise((r) => server.close(() => r())) };
});
afterAll(() => app.close());

/** The case's request body, its pad filled in. */
const bodyOf = (s: Side): string | undefined => (s.body === undefined ? undefined : s.body.replace("@PAD@", "x".repeat(s.pad ?? 0)));

describe("the stream edge through the proxy", () => {
  it("plays every case that is the proxy's: all but the middleware's options and content codings", () => {
    expect(OURS.length).toBe(19);
    expect(TABLE.cases.length - OURS.length).toBe(10);
  });

  for (const c of OURS) {
    it(c.name, async () => {
      const flags = ["--log-level", "silent", ...TABLE.sidecarArgs, ...(c.options?.resume === false ? ["--store", "none"] : [])];
      const proxy = await startProxy(app.url, flags);
      const body = bodyOf(c.request);
      const res = await fetch(`${proxy.url}${c.request.path}`, { method: c.request.method, headers: [...c.request.headers, ["x-case", c.name]], ...(body !== undefined ? { body } : {}) });
      const text = await res.text();
      expect(res.status).toBe(c.expect.status);
      expect(app.seen.has(c.name)).toBe(c.expect.app);
      if (c.expect.appBody === "same") expect(app.seen.get(c.name)).toBe(body ?? "");
      if (c.expect.body !== undefined) expect(c.expect.ids === "strip" ? text.replace(/^id:.*\n/gm, "") : text).toBe(c.expect.body);
      if (c.expect.ids === "strip") expect(text).toMatch(/^id: /m);
      for (const [name, value] of Object.entries(c.expect.headers ?? {})) expect(res.headers.get(name)).toBe(value);
    });
  }
});
