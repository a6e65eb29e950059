import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SEA, run } from "../../scripts/harness/process.js";
import { FORBIDDEN_ROOT, againstDirect, bytesLine, events, snapshotRuns, snapshotsHold, snapshotsOften, stateBytes, unreachable, wipedRuns } from "./checks.js";
import { CLI_MS, check, fixAnswer, ownFlags, stateFiles } from "./cli.js";
import { directly, loadFixtures, replayUpstream, runThread, type Thread } from "./replay.js";

/**
 * Real LangGraph answers (test/fixtures/frameworks/langgraph/, recorded with
 * ag_ui_langgraph's own FastAPI endpoint) replayed byte for byte into the real
 * HttpAgent: LangGraph alone, the reference and the negative control, and
 * the same answers through `agui-state fix --own` (the real binary, with the
 * state the client sent as --state); then `check` on each recorded answer,
 * with and without --own. The recipe for LangGraph is `own` = the members its
 * state has (docs/frameworks.md): every STATE_SNAPSHOT it sends is its whole
 * state, and replaces the client's (AG-UI), the client's own key with it.
 */

const FIXTURES = loadFixtures("langgraph");
const files = stateFiles();
afterAll(() => files.done());

let direct = new Map<string, Thread>();
beforeAll(async () => void (direct = await directly(FIXTURES)), 120_000);

it("the LangGraph fixtures are there, each a thread of two runs or more", () => {
  expect(FIXTURES.length).toBeGreaterThan(0);
  for (const f of FIXTURES) expect(f.runs.length, f.graph).toBeGreaterThanOrEqual(2);
  expect(new Set(FIXTURES.map((f) => f.path)).size, "one path per graph: the replay routes by path").toBe(FIXTURES.length);
});

describe.each(FIXTURES.map((f) => ({ graph: f.graph, f })))("$graph", ({ f }) => {
  it("LangGraph alone (the negative control): every run after the first that snapshots wipes the client's key", () => {
    const d = direct.get(f.graph) as Thread;
    expect(d.runs.map((r) => r.rejected ?? "resolved").length).toBe(f.runs.length);
    expect(wipedRuns(f, d)).toEqual(snapshotRuns(f));
  });

  it("fix --own: the client ends with LangGraph's state plus its key, LangGraph's messages, no warning, no RUN_ERROR of ours, fewer state bytes", async () => {
    const upstream = await replayUpstream(FIXTURES, fixAnswer(f, files));
    try {
      const d = direct.get(f.graph) as Thread;
      const ours = await runThread(upstream.url, f);
      expect(againstDirect(f, d, ours)).toEqual([]);
      console.log(bytesLine(f, "fix --own", d, ours));
      if (snapshotsOften(f)) expect(stateBytes(ours)).toBeLessThan(stateBytes(d));
    } finally {
      await upstream.close();
    }
  }, 120_000);

  it("check --own with the state the client sent: no owned member is called wiped; the client's key is, on each run that snapshots while the client holds it (LangGraph alone does wipe it)", async () => {
    for (const [i, r] of f.runs.entries()) {
      const got = await check(r.body, files.write(r.request.state), ownFlags(f));
      const held = (r.request.state as Record<string, unknown> | undefined)?.[f.clientKey] !== undefined;
      const snapshots = events(r.body).some((e) => e.type === "STATE_SNAPSHOT");
      // A root __proto__ is no own's (FORBIDDEN_ROOT, checks.ts): one the client holds and a snapshot changes is wiped too.
      const wiped = got.findings.filter((l) => l.code === "SNAPSHOT_WIPE" && l.pointer !== `/${FORBIDDEN_ROOT}`).map((l) => l.pointer);
      expect([...new Set(wiped)], `run ${i + 1}: ${got.stderr}`).toEqual(held && snapshots ? [`/${f.clientKey}`] : []);
    }
  }, 120_000);

  it("check --own on the answers fix --own wrote, with the state the client sent: nothing to report (the CI gate for a LangGraph app behind agui-state)", async () => {
    const fixer = fixAnswer(f, files);
    for (const [i, r] of f.runs.entries()) {
      const fixed = await fixer(r, r.request);
      expect(fixed.status, `run ${i + 1}: ${String(fixed.body)}`).toBe(r.status);
      const got = await check(fixed.body, files.write(r.request.state), ownFlags(f));
      expect({ code: got.code, findings: got.findings }, `run ${i + 1}: ${got.stderr}`).toEqual({ code: 0, findings: [] });
    }
  }, 120_000);

  it("check without --own (today's verdict): on each run after the first that snapshots, the client's key and the members LangGraph rewrites are called wiped, nothing else", async () => {
    for (const n of snapshotRuns(f)) {
      const r = f.runs[n - 1] as (typeof f.runs)[number];
      const got = await check(r.body, files.write(r.request.state), []);
      expect(got.code, got.stderr).toBe(1);
      const wiped = new Set(got.findings.filter((l) => l.code === "SNAPSHOT_WIPE").map((l) => l.pointer));
      expect(wiped.has(`/${f.clientKey}`), `run ${n}: ${[...wiped].join(", ")}`).toBe(true);
      for (const p of wiped) expect(p === `/${f.clientKey}` || p === `/${FORBIDDEN_ROOT}` || f.own.some((o) => p === o || p?.startsWith(`${o}/`)), `run ${n}: ${String(p)}`).toBe(true);
    }
  }, 120_000);

  it("a root member named __proto__: no op can name it, so no own holds it; LangGraph alone gives it to the client, through fix --own it never arrives, and fix --report says so (wiped, kept)", async () => {
    const sent = snapshotsHold(f, FORBIDDEN_ROOT);
    expect(f.own).not.toContain(`/${FORBIDDEN_ROOT}`);
    const upstream = await replayUpstream(FIXTURES, fixAnswer(f, files));
    try {
      const ours = await runThread(upstream.url, f);
      expect(unreachable(ours.state)).toEqual([]);
      expect(unreachable((direct.get(f.graph) as Thread).state)).toEqual(sent ? [`/${FORBIDDEN_ROOT}`] : []);
    } finally {
      await upstream.close();
    }
    for (const r of f.runs) {
      const fixed = await run(SEA, ["fix", "--report", "--state", files.write(r.request.state), ...ownFlags(f)], r.body, CLI_MS);
      expect(fixed.stderr.includes(`/${FORBIDDEN_ROOT}`), fixed.stderr.slice(0, 2000)).toBe(sent);
    }
    if (sent) expect((await run(SEA, ["fix", "--own", `/${FORBIDDEN_ROOT}`], "", CLI_MS)).code).toBe(2);
  }, 120_000);

  it("the recorded answers are whole event streams the client reads", () => {
    for (const r of f.runs) {
      expect(r.status).toBe(200);
      expect(r.contentType).toMatch(/^text\/event-stream/);
      expect(events(r.body)[0]?.type).toBe("RUN_STARTED");
    }
  });
});
