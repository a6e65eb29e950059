import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startProxy, type RunningProxy } from "../proxy/proxy-process.js";
import type { TestUpstream } from "../proxy/upstream.js";
import { againstDirect, bytesLine, snapshotsOften, stateBytes } from "./checks.js";
import { ownFlags } from "./cli.js";
import { directly, loadFixtures, replayUpstream, runThread, type Thread } from "./replay.js";

/**
 * Real LangGraph answers (test/fixtures/frameworks/langgraph/) through
 * `agui-state proxy --own ...` (the real binary) in front of the replay
 * upstream, into the real HttpAgent, against the same answers with LangGraph
 * alone. One proxy per graph: `own` is the graph's state members.
 */

const FIXTURES = loadFixtures("langgraph");
let direct = new Map<string, Thread>();
let upstream: TestUpstream | undefined;
beforeAll(async () => {
  direct = await directly(FIXTURES);
  upstream = await replayUpstream(FIXTURES);
}, 120_000);
afterAll(async () => upstream?.close());

it("the LangGraph fixtures are there", () => expect(FIXTURES.length).toBeGreaterThan(0));

describe.each(FIXTURES.map((f) => ({ graph: f.graph, f })))("$graph", ({ f }) => {
  it("proxy --own: the client ends with LangGraph's state plus its key, LangGraph's messages, no warning, no RUN_ERROR of ours, fewer state bytes", async () => {
    const proxy: RunningProxy = await startProxy((upstream as TestUpstream).url, [...ownFlags(f), "--log-level", "warn"]);
    const d = direct.get(f.graph) as Thread;
    const ours = await runThread(proxy.url, f);
    expect(againstDirect(f, d, ours)).toEqual([]);
    console.log(bytesLine(f, "proxy --own", d, ours));
    if (snapshotsOften(f)) expect(stateBytes(ours)).toBeLessThan(stateBytes(d));
    // The proxy said nothing at warn: no upstream failure, no stream it could not repair.
    expect(proxy.child.stderr).toBe("");
  }, 120_000);
});
