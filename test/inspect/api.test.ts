import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { GatedAgent, outcomeEvents, sse, startInspecting, type InspectingProxy } from "../../scripts/harness/inspector.js";
import { SEA, run, start } from "../../scripts/harness/process.js";

/**
 * `proxy --inspect`'s JSON API, its bounds and its guards, and `check
 * --html`'s report, through the real binary (issue 25; protocol/README.md,
 * "The inspector"). The page itself is tested in chromium (browser.test.ts).
 */

let agent: GatedAgent | undefined;
let proxy: InspectingProxy | undefined;
afterEach(async () => {
  proxy?.child.kill("SIGTERM");
  await proxy?.child.waitForExit().catch(() => undefined);
  await agent?.close();
  proxy = agent = undefined;
});

const input = (runId: string) => JSON.stringify({ threadId: "t1", runId, state: { theme: "dark" }, messages: [], tools: [], context: [], forwardedProps: {} });

async function runThrough(p: InspectingProxy, runId: string): Promise<string> {
  const r = await fetch(`${p.url}/agent`, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, body: input(runId) });
  return r.text();
}

/** A GET with node:http, so that the Host header can be anything. */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      })
      .on("error", reject);
  });
}

interface Detail {
  id: string;
  seen: number;
  evicted: number;
  bytes: number;
  status: string;
  outcomes: Record<string, number>;
  baseline: unknown;
  events: { n: number; type: string; ms?: number; delivery: string; outcomes: Record<string, number>; findings: { kind: string; outcome: string; index?: number }[]; sent?: unknown; forwarded?: unknown; state?: unknown }[];
}

describe("GET /api/streams and /api/streams/:id", () => {
  it("give each stream's events: number, type, outcome counts, findings, and the state after each", async () => {
    agent = new GatedAgent((i) => outcomeEvents(i.threadId, i.runId), false);
    proxy = await startInspecting(await agent.listen());
    const body = await runThrough(proxy, "r1");
    const list = JSON.parse((await get(`${proxy.inspector}api/streams`)).body) as { dropped: number; streams: { id: string; threadId: string; runId: string; path: string; status: string; outcomes: Record<string, number> }[] };
    expect(list.dropped).toBe(0);
    expect(list.streams).toMatchObject([{ id: "1", threadId: "t1", runId: "r1", path: "/agent", status: "complete", outcomes: { passed: 1, mended: 1, discarded: 1, kept: 0 } }]);
    const d = JSON.parse((await get(`${proxy.inspector}api/streams/1`)).body) as Detail;
    expect(d.baseline).toEqual({ theme: "dark" });
    expect(d.events.map((e) => [e.n, e.type, e.delivery])).toEqual([
      [1, "RUN_STARTED", "passed"],
      [2, "STATE_DELTA", "mended"],
      [3, "STATE_DELTA", "discarded"],
      [4, "STATE_DELTA", "passed"],
      [5, "STATE_SNAPSHOT", "passed"],
      [6, "RUN_FINISHED", "passed"],
    ]);
    // Each event's time since the stream started, as the proxy read it.
    expect(d.events.every((e) => typeof e.ms === "number" && e.ms >= 0)).toBe(true);
    expect(d.events[1]?.findings).toMatchObject([{ kind: "dropped", outcome: "mended", index: 0 }]);
    expect(d.events[2]?.findings).toMatchObject([{ kind: "dropped", outcome: "discarded", index: 0 }]);
    expect(d.events[4]?.findings).toMatchObject([{ kind: "wiped", outcome: "passed" }]);
    // What was forwarded is what the client got: the mended delta is in the body, the discarded one is not.
    expect(body).toContain(JSON.stringify(d.events[1]?.forwarded));
    expect(body).not.toContain('"/draft"');
    expect(d.events[1]?.state).toEqual({ theme: "dark", steps: [{ title: "plan", done: false }] });
    expect(d.events[2]?.state).toEqual(d.events[1]?.state);
    expect(d.events[5]?.state).toEqual({ steps: [{ title: "plan", done: true }], plan: "plan" });
    // Only the events after a number, for a page that follows.
    const after = JSON.parse((await get(`${proxy.inspector}api/streams/1?after=4`)).body) as Detail;
    expect(after.events.map((e) => e.n)).toEqual([5, 6]);
    // And only the last of them, for a page that follows a fast stream.
    const last = JSON.parse((await get(`${proxy.inspector}api/streams/1?after=1&limit=2`)).body) as Detail;
    expect(last.events.map((e) => e.n)).toEqual([5, 6]);
    const few = JSON.parse((await get(`${proxy.inspector}api/streams/1?after=3&limit=9`)).body) as Detail;
    expect(few.events.map((e) => e.n)).toEqual([4, 5, 6]);
    const missing = await get(`${proxy.inspector}api/streams/9`);
    expect([missing.status, JSON.parse(missing.body).error.code]).toEqual([404, "inspect_not_found"]);
  });

  it("keep the last N streams and M events each, oldest first, within a byte cap, and say how many went", async () => {
    agent = new GatedAgent((i) => outcomeEvents(i.threadId, i.runId), false);
    proxy = await startInspecting(await agent.listen(), ["--inspect-streams", "2", "--inspect-events", "4"]);
    for (const r of ["r1", "r2", "r3"]) await runThrough(proxy, r);
    const list = JSON.parse((await get(`${proxy.inspector}api/streams`)).body) as { dropped: number; caps: object; streams: { id: string; runId: string }[] };
    expect(list.caps).toEqual({ streams: 2, events: 4, bytes: 16 * 1024 * 1024 });
    expect(list.dropped).toBe(1);
    expect(list.streams.map((s) => [s.id, s.runId])).toEqual([["3", "r3"], ["2", "r2"]]);
    expect((await get(`${proxy.inspector}api/streams/1`)).status).toBe(404);
    const d = JSON.parse((await get(`${proxy.inspector}api/streams/3`)).body) as Detail;
    expect([d.seen, d.evicted, d.events.map((e) => e.n)]).toEqual([6, 2, [3, 4, 5, 6]]);
  });

  it("holds a stream to its byte cap, dropping its oldest events first", async () => {
    const big = "x".repeat(200);
    agent = new GatedAgent(() => ({ before: [{ type: "RUN_STARTED", threadId: "t", runId: "r" }, ...Array.from({ length: 8 }, (_, i) => ({ type: "STATE_DELTA", delta: [{ op: "add", path: `/k${i}`, value: big }] }))], after: [] }), false);
    proxy = await startInspecting(await agent.listen(), ["--inspect-bytes", "4K"]);
    await runThrough(proxy, "r");
    const d = JSON.parse((await get(`${proxy.inspector}api/streams/1`)).body) as Detail;
    expect(d.bytes).toBeLessThanOrEqual(4096);
    expect(d.evicted).toBeGreaterThan(0);
    expect(d.evicted + d.events.length).toBe(9);
    // The newest stays, with the whole state after it.
    expect(Object.keys(d.events.at(-1)?.state as object)).toEqual(["theme", "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"]);
  });
});

describe("the inspector's guards", () => {
  it("without a token answers only requests addressed to a loopback name (no DNS rebinding)", async () => {
    agent = new GatedAgent((i) => outcomeEvents(i.threadId, i.runId), false);
    proxy = await startInspecting(await agent.listen());
    const bad = await get(`${proxy.inspector}api/streams`, { host: "attacker.example:80" });
    expect([bad.status, JSON.parse(bad.body).error.code]).toEqual([403, "inspect_bad_host"]);
    expect((await get(`${proxy.inspector}api/streams`, { host: "localhost" })).status).toBe(200);
    const page = await get(proxy.inspector);
    expect(page.headers["content-security-policy"]).toMatch(/default-src 'none'; script-src 'sha256-/);
    expect(page.headers["referrer-policy"]).toBe("no-referrer");
  });

  it("with a token refuses every request without it, and takes ?token= for the page only", async () => {
    const token = "0123456789abcdef-token";
    agent = new GatedAgent((i) => outcomeEvents(i.threadId, i.runId), false);
    proxy = await startInspecting(await agent.listen(), [], { AGUI_STATE_INSPECT_TOKEN: token });
    for (const p of ["", "api/streams", "api/streams/1", "api/live"]) {
      const r = await get(`${proxy.inspector}${p}`);
      expect([p, r.status, JSON.parse(r.body).error.code]).toEqual([p, 401, "inspect_unauthorized"]);
      expect((await get(`${proxy.inspector}${p}`, { authorization: `Bearer ${token}x` })).status).toBe(401);
    }
    expect((await get(`${proxy.inspector}api/streams`, { authorization: `Bearer ${token}` })).status).toBe(200);
    expect((await get(`${proxy.inspector}?token=${token}`)).status).toBe(200);
    expect((await get(`${proxy.inspector}api/streams?token=${token}`)).status).toBe(401);
  });

  it("refuses a non-loopback --inspect without a token, and a short token", async () => {
    const refused = start(SEA, ["proxy", "--upstream", "http://127.0.0.1:9", "--inspect", "0.0.0.0:0"]);
    expect((await refused.waitForExit()).code).toBe(2);
    expect(refused.stderr).toContain("not a loopback address");
    expect(refused.stdout.length).toBe(0);
    const short = start(SEA, ["proxy", "--upstream", "http://127.0.0.1:9", "--inspect", "0.0.0.0:0", "--inspect-token", "short"]);
    expect((await short.waitForExit()).code).toBe(2);
    expect(short.stderr).toContain("--inspect-token");
    const orphan = start(SEA, ["proxy", "--upstream", "http://127.0.0.1:9", "--inspect-events", "5"]);
    expect((await orphan.waitForExit()).code).toBe(2);
    expect(orphan.stderr).toContain("needs --inspect");
    // With a token, any address: here every interface, on a free port.
    agent = new GatedAgent((i) => outcomeEvents(i.threadId, i.runId), false);
    const child = start(SEA, ["proxy", "--upstream", await agent.listen(), "--listen", "127.0.0.1:0", "--inspect", "0.0.0.0:0", "--inspect-token", "0123456789abcdef"]);
    await child.until(() => child.stdout.toString("utf8").includes("listening on"), "the listening line");
    expect(child.stdout.toString("utf8")).toMatch(/^inspector on http:\/\/0\.0\.0\.0:\d+\/\n/);
    child.kill("SIGTERM");
    expect((await child.waitForExit()).code).toBe(0);
  });
});

describe("check --html FILE", () => {
  it("writes one self-contained page with the stream's data, and exits as check does", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "agui-check-html-"));
    const { before, after } = outcomeEvents("t1", "r1");
    const stream = [...before, ...after].map(sse).join("");
    const state = path.join(dir, "state.json");
    writeFileSync(state, JSON.stringify({ theme: "dark" }));
    const plain = await run(SEA, ["check", "-", "--state", state], stream);
    const file = path.join(dir, "report.html");
    const withHtml = await run(SEA, ["check", "-", "--state", state, "--html", file], stream);
    expect(withHtml.code).toBe(plain.code);
    expect(withHtml.code).toBe(1);
    expect(withHtml.stdout.toString("utf8")).toBe(plain.stdout.toString("utf8"));
    const html = readFileSync(file, "utf8");
    // Self-contained: no src=, no href=, no request allowed by its policy.
    expect(html).not.toMatch(/\b(src|href)=/);
    expect(html).toMatch(/<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-[^']+'; style-src 'sha256-[^']+'; connect-src 'none'/);
    const data = JSON.parse(/<script type="application\/json" id="report">(.*?)<\/script>/s.exec(html)?.[1] ?? "null") as { file: unknown; streams: Record<string, Detail> };
    // The file it is about: its name and its size as read (stdin, here).
    expect(data.file).toEqual({ name: "(stdin)", bytes: Buffer.byteLength(stream) });
    const d = data.streams["1"] as Detail;
    expect(d.events.map((e) => e.findings.map((f) => f.kind))).toEqual([[], ["dropped"], ["dropped"], ["dropped"], ["wiped"], []]);
    // check sends nothing: every event passed as sent; and no time of reading, which says nothing about a file.
    expect(d.events.map((e) => e.delivery)).toEqual(Array(6).fill("passed"));
    expect(d.events.filter((e) => "ms" in e)).toEqual([]);
    // A named file is named as given.
    const input = path.join(dir, "run.sse");
    writeFileSync(input, stream);
    expect((await run(SEA, ["check", input, "--html", file], "")).code).toBe(1);
    expect(JSON.parse(/<script type="application\/json" id="report">(.*?)<\/script>/s.exec(readFileSync(file, "utf8"))?.[1] ?? "null").file).toEqual({ name: input, bytes: Buffer.byteLength(stream) });
    // As the client holds it: without the deltas it dropped, then the snapshot.
    expect(d.events[3]?.state).toEqual({ theme: "dark" });
    expect(d.events.at(-1)?.state).toEqual({ steps: [{ title: "plan", done: true }], plan: "plan" });
    const unwritable = await run(SEA, ["check", "-", "--html", path.join(dir, "no/such/dir/x.html")], stream);
    expect(unwritable.code).toBe(2);
    expect(unwritable.stderr).toContain("--html");
  });
});
