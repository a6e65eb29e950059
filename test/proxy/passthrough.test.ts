import { randomBytes } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { logged } from "../../scripts/harness/process.js";
import { request } from "./http-client.js";
import { LISTENING, startProxy } from "./proxy-process.js";
import { sse, TestUpstream } from "./upstream.js";

/**
 * What the proxy leaves alone: answers that are not SSE (JSON, AG-UI's
 * protobuf framing), and the request itself (method, path, query, end-to-end
 * headers, body). The real binary, a node:http upstream in this process.
 */

// Bytes no re-encoding would keep: odd spacing, a BOM-less non-ASCII string, an escaped slash.
const JSON_BYTES = Buffer.from('{ "ok" :true,\n  "text":"caf\\u00e9 ☕", "path":"a\\/b" }\n', "utf8");
// A protobuf-framed answer that happens to contain what looks like an SSE event: it must not be "fixed".
const PROTO_BYTES = Buffer.concat([Buffer.from([0, 0, 0, 42]), randomBytes(64), Buffer.from(sse({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/x", value: 1 }] })), Buffer.from([0xff, 0xfe])]);

let upstream: TestUpstream;

beforeEach(async () => {
  upstream = await TestUpstream.start({
    "/json": ({ res }) => res.writeHead(201, { "content-type": "application/json; charset=utf-8", "x-upstream": "yes", "content-length": JSON_BYTES.length }).end(JSON_BYTES),
    "/proto": ({ res }) => res.writeHead(200, { "content-type": "application/vnd.ag-ui.event+proto" }).end(PROTO_BYTES),
    "/echo": ({ res }) =>
      // Hop-by-hop headers on the way back too, one of them named by Connection.
      res.writeHead(200, { "content-type": "text/plain", "keep-alive": "timeout=5", "x-hop": "1", connection: "x-hop", "x-kept": "1" }).end("ok"),
  });
});
afterEach(() => upstream.close());

describe("agui-state proxy passes through what it does not fix", () => {
  it("passes a JSON answer through byte for byte, with its status and end-to-end headers", async () => {
    const proxy = await startProxy(upstream.url);
    const answer = await request(`${proxy.url}/json`);
    expect(answer.status).toBe(201);
    expect(answer.body.equals(JSON_BYTES)).toBe(true);
    expect(answer.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(answer.headers["content-length"]).toBe(String(JSON_BYTES.length));
    expect(answer.headers["x-upstream"]).toBe("yes");
  });

  it("passes the protobuf framing through byte for byte, and the log says it was not fixed", async () => {
    const proxy = await startProxy(upstream.url);
    const answer = await request(`${proxy.url}/proto`, { method: "POST", headers: { accept: "application/vnd.ag-ui.event+proto" }, body: "{}" });
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/vnd.ag-ui.event+proto");
    expect(answer.body.equals(PROTO_BYTES)).toBe(true);
    const msg = "upstream answered in the protobuf framing; passing it through untouched, its deltas unchecked";
    await proxy.child.until(() => logged(proxy.child.stderr, msg) === 1, "the protobuf log record");
  });

  it("forwards method, path under the upstream's base path, query, body and end-to-end headers, minus hop-by-hop ones", async () => {
    const proxy = await startProxy(`${upstream.url}/echo/base/`);
    const next = upstream.nextRequest();
    await request(`${proxy.url}/agent/run?x=1&y=a%2Fb`, {
      method: "PUT",
      headers: {
        "content-type": "application/json",
        authorization: "Bearer t0ken",
        cookie: "a=1; b=2",
        "x-trace": "abc",
        // Hop-by-hop: each of these describes the client's connection to the proxy only.
        connection: "keep-alive, x-conn-only",
        "x-conn-only": "1",
        "keep-alive": "timeout=5",
        te: "trailers",
        "proxy-authorization": "Basic cHJveHk6c2VjcmV0",
        trailer: "x-checksum",
      },
      body: '{"state":{}}',
    });
    const seen = await next;
    expect(seen.method).toBe("PUT");
    expect(seen.url).toBe("/echo/base/agent/run?x=1&y=a%2Fb");
    expect(seen.body.toString("utf8")).toBe('{"state":{}}');
    expect(seen.headers).toMatchObject({ "content-type": "application/json", authorization: "Bearer t0ken", cookie: "a=1; b=2", "x-trace": "abc", "x-forwarded-proto": "http" });
    expect(seen.headers["x-forwarded-for"]).toBe("127.0.0.1");
    expect(seen.headers.host).toBe(new URL(upstream.url).host);
    for (const h of ["x-conn-only", "keep-alive", "te", "proxy-authorization", "trailer"]) expect(seen.headers[h], h).toBeUndefined();
  });

  it("drops the upstream's hop-by-hop headers from the answer and keeps the rest", async () => {
    const proxy = await startProxy(upstream.url);
    const answer = await request(`${proxy.url}/echo`);
    expect(answer.body.toString("utf8")).toBe("ok");
    expect(answer.headers["x-kept"]).toBe("1");
    expect(answer.headers["x-hop"]).toBeUndefined();
    expect(answer.headers["keep-alive"]).toBeUndefined();
  });

  it("prints 'listening on http://HOST:PORT' as its only stdout line, however many requests it serves", async () => {
    const proxy = await startProxy(upstream.url);
    await request(`${proxy.url}/json`);
    await request(`${proxy.url}/proto`);
    proxy.child.kill("SIGTERM");
    expect(await proxy.child.waitForExit()).toEqual({ code: 0, signal: null });
    expect(proxy.child.stdout.toString("utf8")).toMatch(LISTENING);
    expect(proxy.child.stdout.toString("utf8")).toBe(`listening on ${proxy.url}\n`);
  });
});
