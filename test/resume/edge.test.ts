import { describe, expect, it } from "vitest";
import { credentialOf, DEFAULT_POLICY, parsePart, type CredentialPolicy } from "../../src/resume/credentials.js";
import { agentPath, announcement, classify, GONE_BODY, headerMap, keptHeaders, MAX_THREAD_ID, refusal, threadOf, type RequestHead } from "../../src/resume/edge.js";
import type { RunLog } from "../../src/resume/log.js";
import { MemoryLog } from "../../src/resume/memory-log.js";
import { Recorder } from "../../src/resume/recorder.js";
import { resolve, runStart } from "../../src/resume/rejoin.js";

/**
 * The resume edge (protocol/README.md §16), pure: what a request is, what makes its credential,
 * which headers a rejoin gets again, the announcement and the refusals; then who may read a run,
 * over a real MemoryLog. The same rules run through every server in the conformance table
 * (test/fixtures/resume-edge/cases.json).
 */
const KEY = Buffer.alloc(32, 3);
const head = (method: string, path: string, pairs: [string, string][] = []): RequestHead => ({ method, path, headers: headerMap(pairs) });

describe("classify", () => {
  it("a rejoin is a POST with a non-empty Last-Event-ID; a reload a POST to <agent>/connect; anything else is the app's", () => {
    expect(classify(head("POST", "/agent", [["Last-Event-ID", "x.1.y"]]))).toBe("rejoin");
    expect(classify(head("post", "/agent?q=1", [["last-event-id", "x.1.y"]]))).toBe("rejoin");
    expect(classify(head("POST", "/agent/connect?x=1"))).toBe("reload");
    expect(classify(head("POST", "/agent/connect", [["Last-Event-ID", "x.1.y"]]))).toBe("rejoin");
    expect(classify(head("GET", "/agent", [["Last-Event-ID", "x.1.y"]]))).toBe("forward");
    expect(classify(head("GET", "/agent/connect"))).toBe("forward");
    expect(classify(head("POST", "/agent", [["Last-Event-ID", ""]]))).toBe("forward");
    expect(classify(head("POST", "/agent"))).toBe("forward");
    expect(classify(head("POST", "/connection"))).toBe("forward");
  });

  it("the agent path drops the query, and for a reload /connect", () => {
    expect(agentPath(head("POST", "/a/b?x=/connect"), "rejoin")).toBe("/a/b");
    expect(agentPath(head("POST", "/a/connect?x"), "reload")).toBe("/a");
    expect(agentPath(head("POST", "/connect"), "reload")).toBe("/");
  });
});

describe("headers", () => {
  it("pairs are read by lower-case name, repeats joined with ', ' and cookies with '; '", () => {
    expect(headerMap([["Cookie", "a=1"], ["X-A", "1"], ["cookie", "b=2"], ["x-a", "2"]])).toEqual({ cookie: "a=1; b=2", "x-a": "1, 2" });
  });

  it("a rejoin gets the run's headers less those of one response, with the announcement", () => {
    const kept = keptHeaders({ "content-type": "text/event-stream", "set-cookie": "s=1", "content-length": "9", "content-encoding": "gzip", connection: "keep-alive", "transfer-encoding": "chunked", "x-app": "yes" });
    expect(kept).toEqual({ "content-type": "text/event-stream", "x-app": "yes", "ag-ui-resumable": "true" });
  });

  it("the announcement is exposed to cross-origin pages where the answer is shared, once", () => {
    expect(announcement({})).toEqual({ "ag-ui-resumable": "true" });
    expect(announcement({ "access-control-allow-origin": "*" })).toEqual({ "ag-ui-resumable": "true", "access-control-expose-headers": "ag-ui-resumable" });
    expect(announcement({ "access-control-allow-origin": "https://a", "access-control-expose-headers": "X-Trace" })).toEqual({ "ag-ui-resumable": "true", "access-control-expose-headers": "X-Trace, ag-ui-resumable" });
    expect(announcement({ "access-control-allow-origin": "*", "access-control-expose-headers": "AG-UI-Resumable" })).toEqual({ "ag-ui-resumable": "true" });
    expect(announcement({ "access-control-allow-origin": "*", "access-control-expose-headers": "*" })).toEqual({ "ag-ui-resumable": "true" });
  });

  it("the refusals: 410 with the one JSON body, 204 empty", () => {
    expect(refusal("rejoin")).toEqual({ status: 410, headers: { "content-type": "application/json" }, body: GONE_BODY });
    expect(JSON.parse(GONE_BODY)).toMatchObject({ error: { code: "resume_unknown" } });
    expect(refusal("reload")).toEqual({ status: 204, headers: {}, body: "" });
  });

  it("a threadId past MAX_THREAD_ID, or not a string, names no thread", () => {
    expect(threadOf("t".repeat(MAX_THREAD_ID))).toBe("t".repeat(MAX_THREAD_ID));
    expect(threadOf("t".repeat(MAX_THREAD_ID + 1))).toBe("");
    expect(threadOf(7)).toBe("");
    expect(threadOf(undefined)).toBe("");
  });
});

describe("credentials", () => {
  const cookies: CredentialPolicy = { parts: [{ kind: "header", name: "authorization" }, { kind: "cookie", name: "session" }], connectAnonymous: false };

  it("by default only Authorization counts: cookies rotate (AWSALB, __cf_bm) and never break a rejoin", () => {
    const a = credentialOf(KEY, DEFAULT_POLICY, headerMap([["Authorization", "Bearer a"], ["Cookie", "AWSALB=1; session=s"]]));
    expect(credentialOf(KEY, DEFAULT_POLICY, headerMap([["authorization", "Bearer a"], ["Cookie", "AWSALB=2"]]))).toBe(a);
    expect(credentialOf(KEY, DEFAULT_POLICY, headerMap([["authorization", "Bearer b"]]))).not.toBe(a);
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(credentialOf(Buffer.alloc(32, 4), DEFAULT_POLICY, headerMap([["authorization", "Bearer a"]]))).not.toBe(a);
  });

  it("a request presenting none of the named parts is anonymous: the empty credential", () => {
    expect(credentialOf(KEY, DEFAULT_POLICY, headerMap([["Cookie", "session=s"]]))).toBe("");
    expect(credentialOf(KEY, cookies, headerMap([["Cookie", "AWSALB=1"]]))).toBe("");
  });

  it("a named cookie counts by its own value, whatever else the Cookie header holds", () => {
    const a = credentialOf(KEY, cookies, headerMap([["Cookie", "AWSALB=1; session=s1"]]));
    expect(credentialOf(KEY, cookies, headerMap([["Cookie", "__cf_bm=z"], ["Cookie", "session=s1; AWSALB=2"]]))).toBe(a);
    expect(credentialOf(KEY, cookies, headerMap([["Cookie", "session=s2"]]))).not.toBe(a);
    // Presence is part of it: a value moved from one part to another is another credential.
    expect(credentialOf(KEY, cookies, headerMap([["Authorization", "s1"]]))).not.toBe(credentialOf(KEY, cookies, headerMap([["Cookie", "session=s1"]])));
  });

  it("specs: header:NAME (any case) and cookie:NAME (exact), nothing else", () => {
    expect(parsePart("header:X-Api-Key")).toEqual({ kind: "header", name: "x-api-key" });
    expect(parsePart("cookie:Session")).toEqual({ kind: "cookie", name: "Session" });
    for (const bad of ["x-api-key", "header:", "cookie:a b", "query:x", "header:a;b"]) expect(parsePart(bad)).toBeUndefined();
  });
});

describe("who may read a run", () => {
  const CAPS = { retentionMs: 60_000, maxRunBytes: 1e9, maxTotalBytes: 1e10, maxRuns: 1e6 };
  const EVENTS = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n';

  async function run(log: RunLog, policy: CredentialPolicy, o: { thread?: unknown; headers?: [string, string][]; end?: "finished" | "cancelled" } = {}) {
    const opts = { log, key: KEY, policy, graceMs: 0 };
    const recorder = new Recorder(log, 0, () => {}, undefined);
    await log.begin(recorder.run, runStart(opts, { threadId: "thread" in o ? o.thread : "t", request: head("POST", "/agent", o.headers ?? []), status: 200, response: {}, state: {}, messages: [], opening: recorder.opening }));
    const text = recorder.part(EVENTS);
    if (o.end === "cancelled") recorder.finish("cancelled");
    else recorder.end();
    const ids = [recorder.opening, ...text.split("\n\n").filter((b) => b.startsWith("id: ")).map((b) => b.slice(4, b.indexOf("\n")))];
    return { opts, ids };
  }
  const rejoin = (opts: Parameters<typeof resolve>[0], id: string, pairs: [string, string][] = [], thread: unknown = "t") => resolve(opts, "rejoin", head("POST", "/agent", [...pairs, ["Last-Event-ID", id]]), thread);
  const reload = (opts: Parameters<typeof resolve>[0], pairs: [string, string][] = [], thread: unknown = "t") => resolve(opts, "reload", head("POST", "/agent/connect", pairs), thread);

  it("a run started with no credential: rejoined by its id alone, never reloaded unless the operator opts in", async () => {
    const log = new MemoryLog(CAPS);
    const { opts, ids } = await run(log, DEFAULT_POLICY);
    expect((await rejoin(opts, ids[0] as string)).refused).toBeUndefined();
    expect((await rejoin(opts, ids[0] as string, [["Authorization", "Bearer anyone"]])).refused).toBeUndefined();
    expect((await reload(opts)).refused).toEqual(refusal("reload"));
    expect((await reload({ ...opts, policy: { ...DEFAULT_POLICY, connectAnonymous: true } })).refused).toBeUndefined();
  });

  it("a run started with a credential: rejoined and reloaded with it only", async () => {
    const log = new MemoryLog(CAPS);
    const auth: [string, string][] = [["Authorization", "Bearer a"]];
    const { opts, ids } = await run(log, DEFAULT_POLICY, { headers: auth });
    expect((await rejoin(opts, ids[1] as string, auth)).refused).toBeUndefined();
    expect((await rejoin(opts, ids[1] as string)).refused).toEqual(refusal("rejoin"));
    expect((await rejoin(opts, ids[1] as string, [["Authorization", "Bearer b"]])).refused).toEqual(refusal("rejoin"));
    expect((await rejoin(opts, ids[1] as string, auth, "t2")).refused).toEqual(refusal("rejoin"));
    expect((await reload(opts, auth)).refused).toBeUndefined();
    expect((await reload(opts)).refused).toEqual(refusal("reload"));
    expect((await reload({ ...opts, policy: { ...DEFAULT_POLICY, connectAnonymous: true } })).refused).toEqual(refusal("reload"));
  });

  it("a run with no thread, or one past the cap, is never reloaded; it is still rejoined by its id", async () => {
    // null: a body without a threadId (the helpers take undefined for their default thread).
    for (const thread of [null, "t".repeat(MAX_THREAD_ID + 1)]) {
      const log = new MemoryLog(CAPS);
      const auth: [string, string][] = [["Authorization", "Bearer a"]];
      const { opts, ids } = await run(log, DEFAULT_POLICY, { thread, headers: auth });
      expect((await reload(opts, auth, thread)).refused).toEqual(refusal("reload"));
      expect((await reload(opts, auth, "")).refused).toEqual(refusal("reload"));
      expect((await rejoin(opts, ids[0] as string, auth, thread)).refused).toBeUndefined();
    }
  });

  it("a run that ended broken is refused from its last event, so its client fails at once; from an earlier one it still replays what was missed", async () => {
    const log = new MemoryLog(CAPS);
    const { opts, ids } = await run(log, DEFAULT_POLICY, { end: "cancelled" });
    expect((await rejoin(opts, ids[2] as string)).refused).toEqual(refusal("rejoin"));
    const earlier = await rejoin(opts, ids[1] as string);
    expect(earlier.refused === undefined && earlier.after).toBe(1);
    // A finished run's client that had everything: nothing more, and a clean end.
    const done = await run(log, DEFAULT_POLICY);
    expect((await rejoin(done.opts, done.ids[2] as string)).refused).toBeUndefined();
  });
});
