import { HttpAgent } from "@ag-ui/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Json } from "../../src/core/index.js";
import type { Finding } from "../../src/stream/findings.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { startProxy } from "./proxy-process.js";
import { streamOf } from "./sloppy-agent.js";
import { TestUpstream, writeSliced, type Handler } from "./upstream.js";

/**
 * Issue 32, case 4: an agent that sends a STATE_SNAPSHOT whose value is not
 * an object, then a STATE_DELTA written for the object state it really keeps.
 * Through the real `proxy`, the real HttpAgent keeps an object: its own keys
 * stand, the next delta applies with no warning, and the proxy's log names
 * the snapshot (ROOT_NOT_OBJECT, outcome discarded). Straight to the agent,
 * the same client ends with the value of the snapshot (the negative control).
 */

const CLIENT_KEYS = { selectedLayer: "era5" };

/** The agent: the bad snapshot, then a delta that adds `done`. */
function agentRoute(bad: Json): Handler {
  return (seen) => {
    const { threadId, runId } = JSON.parse(seen.body.toString("utf8")) as { threadId: string; runId: string };
    seen.res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    writeSliced(seen.res, streamOf([{ type: "RUN_STARTED", threadId, runId }, { type: "STATE_SNAPSHOT", snapshot: bad }, { type: "STATE_DELTA", delta: [{ op: "add", path: "/done", value: true }] }, { type: "RUN_FINISHED", threadId, runId }]), 5);
    seen.res.end();
  };
}

/** The proxy's pino records on stderr. */
const records = (stderr: string | Buffer): Record<string, unknown>[] =>
  stderr
    .toString("utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

let upstream: TestUpstream;
beforeEach(async () => {
  upstream = await TestUpstream.start({ "/string": agentRoute("str"), "/array": agentRoute([1, 2, 3]), "/null": agentRoute(null) });
});
afterEach(() => upstream.close());

describe("HttpAgent through proxy, in front of an agent that sends a snapshot that is not an object", () => {
  for (const route of ["string", "array", "null"]) {
    it(`(${route}) the client keeps an object with its own keys, and the next delta applies with no warning; the log names the snapshot`, async () => {
      const proxy = await startProxy(upstream.url, ["--log-level", "debug"]);
      const agent = new HttpAgent({ url: `${proxy.url}/${route}`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
      expect(await runCollecting(agent, "r1")).toEqual([]);
      expect(agent.state).toEqual({ ...CLIENT_KEYS, done: true });

      await proxy.child.until(() => records(proxy.child.stderr).some((r) => r["msg"] === "event stream fixed"), "the stream's log line");
      const logged = records(proxy.child.stderr);
      const findings = logged.filter((r) => r["msg"] === "event stream finding").map((r) => r["finding"] as Finding);
      expect(findings.map((f) => [f.event, f.type, f.kind, f.code, f.outcome])).toEqual([[2, "STATE_SNAPSHOT", "wiped", "ROOT_NOT_OBJECT", "discarded"]]);
      const stream = logged.find((r) => r["msg"] === "event stream fixed") as { kinds: Record<string, number>; outcomes: Record<string, number> };
      expect(stream.outcomes).toEqual({ passed: 0, mended: 0, discarded: 1, kept: 0 });
      expect(stream.kinds).toEqual({ dropped: 0, ignored: 0, fatal: 0, wiped: 1 });
    });
  }

  it("straight to the agent, the same client ends with the snapshot's value (the negative control)", async () => {
    const agent = new HttpAgent({ url: `${upstream.url}/string`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    await runCollecting(agent, "r1");
    expect(agent.state).not.toEqual({ ...CLIENT_KEYS, done: true });
    expect(typeof agent.state).toBe("string");
  });
});
