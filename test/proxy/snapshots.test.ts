import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import type { Finding } from "../../src/stream/findings.js";
import type { Policy } from "../../src/stream/fixer.js";
import { BINARY, childEnv } from "../../scripts/harness/process.js";
import { request, runInput } from "./http-client.js";
import { replay } from "./oracle.js";
import { startProxy } from "./proxy-process.js";
import { snapshotRoute } from "./snapshot-agent.js";
import { TestUpstream } from "./upstream.js";
import { runCollecting } from "../../scripts/harness/agui-client.js";
import { withoutIds } from "../../scripts/harness/sse-ids.js";

/**
 * Issue 23: the real HttpAgent, through the real `proxy --own /toolState`,
 * in front of an agent that sends a STATE_SNAPSHOT after every tool write.
 * The client's own keys must survive every run, with no warning, on the
 * state the proxy's mirror computed (fix run in this process over the
 * upstream's bytes, with the same policy), in fewer bytes than were sent.
 */

const OWN: Policy = { own: [["toolState"]], snapshots: "pass", joinKeys: false };
const CLIENT_KEYS = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };

let upstream: TestUpstream;
let sent: Buffer[][];

beforeEach(async () => {
  sent = [];
  upstream = await TestUpstream.start({ "/agent": snapshotRoute(sent) });
});
afterEach(() => upstream.close());

const bytes = (slices: readonly Buffer[]): number => slices.reduce((n, s) => n + s.length, 0);

/** The proxy's pino records on stderr. */
const records = (stderr: string | Buffer): Record<string, unknown>[] =>
  stderr
    .toString("utf8")
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe("HttpAgent through proxy --own /toolState, in front of an agent that sends a snapshot on every write", () => {
  it("keeps the client's keys on every run, with no warning, on the proxy's mirror, in fewer bytes", async () => {
    const proxy = await startProxy(upstream.url, ["--own", "/toolState", "--log-level", "debug"]);
    const agent = new HttpAgent({ url: `${proxy.url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    for (const runId of ["r1", "r2"]) {
      const before = structuredClone(agent.state) as JsonObject;
      expect(await runCollecting(agent, runId)).toEqual([]);
      const expected = replay(before, sent.at(-1) ?? [], OWN);
      expect(agent.state).toEqual(expected.state);
      expect(agent.state).toMatchObject(CLIENT_KEYS);
    }
    // The server's namespace is what its last snapshot said; the member it owns nothing of is not applied.
    expect((agent.state as JsonObject)["toolState"]).toEqual({ "tool-0": { run: "r2", step: 0 }, "tool-1": { run: "r2", step: 1 }, "tool-2": { run: "r2", step: 2 } });
    expect(agent.state).not.toHaveProperty("other");

    // The bytes: what the client got against what the upstream sent.
    const answer = await request(`${proxy.url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput(structuredClone(CLIENT_KEYS), "r3") });
    // Each event also carries its id (resume, protocol/README.md §16); the rest is fix's text, in fewer bytes than were sent.
    const text = withoutIds(answer.body.toString("utf8"));
    expect(text).toBe(replay(CLIENT_KEYS, sent.at(-1) ?? [], OWN).text);
    expect(Buffer.byteLength(text)).toBeLessThan(bytes(sent.at(-1) ?? []) / 2);

    // One info line per stream, its counts those of the debug lines, one per finding.
    await proxy.child.until(() => records(proxy.child.stderr).filter((r) => r["msg"] === "event stream fixed").length === 3, "three stream lines");
    const logged = records(proxy.child.stderr);
    const streams = logged.filter((r) => r["msg"] === "event stream fixed");
    const findings = logged.filter((r) => r["msg"] === "event stream finding").map((r) => r["finding"] as Finding);
    const sum = (key: "kinds" | "outcomes") => {
      const out: Record<string, number> = {};
      for (const s of streams) for (const [k, n] of Object.entries(s[key] as Record<string, number>)) out[k] = (out[k] ?? 0) + n;
      return out;
    };
    const tally = (key: "kind" | "outcome") => {
      const out: Record<string, number> = {};
      for (const f of findings) out[f[key]] = (out[f[key]] ?? 0) + 1;
      return out;
    };
    expect(Object.fromEntries(Object.entries(sum("kinds")).filter(([, n]) => n > 0))).toEqual(tally("kind"));
    expect(Object.fromEntries(Object.entries(sum("outcomes")).filter(([, n]) => n > 0))).toEqual(tally("outcome"));
    // Three snapshots a run, each leaving out both client keys and setting `other`, which the client does not hold
    // and the server does not own (issue 23 §1): each is a finding the proxy kept the client's side for.
    expect(tally("outcome")).toEqual({ kept: 3 * 3 * 3 });
    expect(new Set(findings.map((f) => f.pointer))).toEqual(new Set(["/selectedLayer", "/ui", "/other"]));
  });

  it("without --own, the same agent wipes the client's keys (the negative control), and check says so", async () => {
    const proxy = await startProxy(upstream.url);
    const agent = new HttpAgent({ url: `${proxy.url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    expect(await runCollecting(agent, "r1")).toEqual([]);
    expect(agent.state).not.toHaveProperty("selectedLayer");
    expect(agent.state).not.toHaveProperty("ui");
    expect(agent.state).toEqual(replay(CLIENT_KEYS, sent.at(-1) ?? []).state);

    // check, on the stream as the upstream sent it, from the state the client held.
    const stream = Buffer.concat(sent.at(-1) ?? []);
    const state = JSON.stringify(CLIENT_KEYS);
    const dir = mkdtempSync(path.join(tmpdir(), "agui-snapshots-"));
    writeFileSync(path.join(dir, "state.json"), state);
    const r = spawnSync(BINARY, ["check", "--json", "--state", path.join(dir, "state.json")], { input: stream, env: childEnv(), timeout: 15_000 });
    rmSync(dir, { recursive: true, force: true });
    expect(r.status).toBe(1);
    const lines = r.stdout.toString("utf8").trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    const wiped = lines.filter((l) => l["kind"] === "wiped");
    // The first snapshot wipes both; after it they are gone, and nothing is left to wipe.
    expect(wiped.map((f) => [f["event"], f["pointer"], f["code"], f["outcome"]])).toEqual([
      [4, "/selectedLayer", "SNAPSHOT_WIPE", "passed"],
      [4, "/ui", "SNAPSHOT_WIPE", "passed"],
    ]);
    expect(wiped[0]?.["hint"]).toMatch(/fix --own/);
    expect(lines.at(-1)).toEqual({ summary: { events: 11, deltas: 0, dropped: 0, ignored: 0, fatal: 0, wiped: 1 } });
  });
});
