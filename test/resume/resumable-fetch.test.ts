import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { resumableFetch } from "../../src/web/resume/index.js";

/**
 * resumableFetch's reading of ids (protocol/README.md §16; HTML Standard, "Interpreting an event
 * stream"), over a real loopback HTTP server and Node's fetch: a block with an id and no data (the
 * opening block) gives the id to rejoin from; an `id` field with no value takes it away again.
 */
const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

const RUN = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n';
const END = 'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n';

/** A server whose first answer is `first`, then a broken connection; a rejoin gets `rest`. What each request's Last-Event-ID was goes in `asked`. */
async function serve(first: string, rest: string): Promise<{ url: string; asked: (string | undefined)[] }> {
  const asked: (string | undefined)[] = [];
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const last = req.headers["last-event-id"];
      asked.push(typeof last === "string" ? last : undefined);
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (last !== undefined) return void res.end(rest);
      // The block, then the connection breaks mid-answer (chunked, never terminated).
      res.write(first, () => setImmediate(() => res.socket?.destroy()));
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`, asked };
}

const post = { method: "POST", headers: { "content-type": "application/json" }, body: "{}" };

describe("resumableFetch and ids without data", () => {
  it("a cut after the opening block alone rejoins from its id, and the body is the opening block then the rejoin's events, once each", async () => {
    const { url, asked } = await serve("id: RUN.0.OPEN\n\n", `id: RUN.1.A\n${RUN}id: RUN.2.B\n${END}`);
    const res = await resumableFetch({ backoffMs: 1 })(url, post);
    expect(await res.text()).toBe(`id: RUN.0.OPEN\n\nid: RUN.1.A\n${RUN}id: RUN.2.B\n${END}`);
    expect(asked).toEqual([undefined, "RUN.0.OPEN"]);
  });

  it("an id field with no value leaves no id: the cut is not rejoined, and the body fails", async () => {
    const { url, asked } = await serve("id: RUN.0.OPEN\n\nid\n\n", END);
    const res = await resumableFetch({ backoffMs: 1 })(url, post);
    await expect(res.text()).rejects.toThrow();
    expect(asked).toEqual([undefined]);
  });
});
