import type { ServerResponse } from "node:http";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { logged } from "../../scripts/harness/process.js";
import { withoutIds } from "../../scripts/harness/sse-ids.js";
import { openStream, request, runInput } from "./http-client.js";
import { spawnProxy, startProxy } from "./proxy-process.js";
import { freePort, sse, TestUpstream, type Seen } from "./upstream.js";

/**
 * How the proxy fails and stops: 502s with a JSON body, a client that hangs
 * up, SIGTERM with a stream open. The real binary, a node:http upstream in
 * this process; every wait is on an event, with the harness's hang guards.
 */

const STOPPING = "stopping: no new connections; letting open streams finish";

let upstream: TestUpstream;
/** Streams the /hold route has opened and not finished: the test decides when they end. */
let held: Seen[];

/** Finishes a held stream: the rest of the run, then the end. */
const release = (res: ServerResponse) => res.end(sse({ type: "RUN_FINISHED", threadId: "t1", runId: "r1" }));

beforeEach(async () => {
  held = [];
  upstream = await TestUpstream.start({
    // The first event at once, the rest when the test releases it.
    "/hold": (seen) => {
      seen.res.writeHead(200, { "content-type": "text/event-stream" });
      seen.res.write(sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }));
      held.push(seen);
    },
    // One event, then the connection drops: an upstream that crashed mid-run.
    "/die": (seen) => {
      seen.res.writeHead(200, { "content-type": "text/event-stream" });
      seen.res.write(sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }), () => seen.res.socket?.destroy());
    },
    // Takes the request and hangs up without a word.
    "/vanish": (seen) => seen.res.socket?.destroy(),
  });
});
afterEach(() => upstream.close());

describe("agui-state proxy when things go wrong", () => {
  it("answers 502 with a JSON body naming the cause when the upstream cannot be reached", async () => {
    const port = await freePort();
    const proxy = await startProxy(`http://127.0.0.1:${port}`);
    const answer = await request(`${proxy.url}/agent`, { method: "POST", body: runInput({}) });
    expect(answer.status).toBe(502);
    expect(answer.headers["content-type"]).toBe("application/json");
    const body = JSON.parse(answer.body.toString("utf8")) as { error: Record<string, string> };
    expect(body.error).toMatchObject({ code: "upstream_unreachable", cause: "ECONNREFUSED", upstream: `http://127.0.0.1:${port}` });
    expect(body.error["message"]).toContain("ECONNREFUSED");
  });

  it("answers 502 with a JSON body when the upstream hangs up without answering", async () => {
    const proxy = await startProxy(upstream.url);
    const answer = await request(`${proxy.url}/vanish`, { method: "POST", body: runInput({}) });
    expect(answer.status).toBe(502);
    const body = JSON.parse(answer.body.toString("utf8")) as { error: Record<string, string> };
    expect(body.error).toMatchObject({ code: "upstream_failed", cause: "ECONNRESET" });
  });

  it("breaks the client's stream, rather than ending it cleanly, when the upstream dies mid-stream", async () => {
    const proxy = await startProxy(upstream.url);
    const stream = openStream(`${proxy.url}/die`, runInput({}));
    expect(await stream.status).toBe(200);
    const done = await stream.done;
    expect(done.complete).toBe(false);
    expect(withoutIds(done.body)).toBe(sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }));
  });

  it("with --detach-grace 0, aborts the upstream request as soon as the client disconnects mid-stream", async () => {
    const proxy = await startProxy(upstream.url, ["--detach-grace", "0"]);
    const next = upstream.nextRequest();
    const stream = openStream(`${proxy.url}/hold`, runInput({}));
    expect(await stream.first).toContain("RUN_STARTED");
    const seen = await next;
    stream.hangUp();
    // The upstream sees its request closed before it finished its answer.
    expect(await seen.closed).toEqual({ finished: false });
  });

  it("by default, a client that disconnects mid-stream leaves the run going; nobody back within the grace period, the upstream request is aborted", async () => {
    const proxy = await startProxy(upstream.url, ["--detach-grace", "0.3"]);
    const next = upstream.nextRequest();
    const stream = openStream(`${proxy.url}/hold`, runInput({}));
    expect(await stream.first).toContain("RUN_STARTED");
    const seen = await next;
    stream.hangUp();
    await proxy.child.until(() => logged(proxy.child.stderr, "the client's connection closed before the answer ended; the run goes on, detached, for the grace period") === 1, "the detach record");
    expect(await seen.closed).toEqual({ finished: false });
    // Logged before the abort, but it reaches stderr through another pipe than the abort reaches the upstream.
    await proxy.child.until(() => logged(proxy.child.stderr, "nobody rejoined within the grace period; cancelling the run") === 1, "the cancel record");
  });

  it("on SIGTERM stops accepting, lets the open stream finish, and exits 0", async () => {
    const proxy = await startProxy(upstream.url);
    const stream = openStream(`${proxy.url}/hold`, runInput({}));
    expect(await stream.first).toContain("RUN_STARTED");
    proxy.child.kill("SIGTERM");
    await proxy.child.until(() => logged(proxy.child.stderr, STOPPING) === 1, "the stopping record");
    // No new connection once it is stopping.
    await expect(request(`${proxy.url}/hold`, { method: "POST", body: runInput({}) })).rejects.toMatchObject({ code: "ECONNREFUSED" });
    expect(proxy.child.exited).toBeUndefined();
    release((held[0] as Seen).res);
    const done = await stream.done;
    expect(done.complete).toBe(true);
    expect(withoutIds(done.body)).toBe(sse({ type: "RUN_STARTED", threadId: "t1", runId: "r1" }) + sse({ type: "RUN_FINISHED", threadId: "t1", runId: "r1" }));
    expect(await proxy.child.waitForExit()).toEqual({ code: 0, signal: null });
  });

  it("on SIGTERM cuts a stream still open when the grace period ends, and still exits 0", async () => {
    const proxy = await startProxy(upstream.url, ["--grace", "0.2"]);
    const stream = openStream(`${proxy.url}/hold`, runInput({}));
    expect(await stream.first).toContain("RUN_STARTED");
    proxy.child.kill("SIGTERM");
    expect((await stream.done).complete).toBe(false);
    expect(await (held[0] as Seen).closed).toEqual({ finished: false });
    expect(await proxy.child.waitForExit()).toEqual({ code: 0, signal: null });
  });

  it("exits 2 with one line on stderr when it cannot listen (issue 22: the exit-code table)", async () => {
    const proxy = await startProxy(upstream.url);
    const port = new URL(proxy.url).port;
    const second = spawnProxy(["--upstream", upstream.url, "--listen", `127.0.0.1:${port}`]);
    const exit = await second.waitForExit();
    expect(exit.code).toBe(2);
    expect(second.stdout.length).toBe(0);
    expect(second.stderr).toContain(`agui-state: cannot listen on 127.0.0.1:${port}`);
  });
});
