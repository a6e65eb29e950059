import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { StreamFixer } from "../../src/stream/fixer.js";
import { startPeer, type Peer } from "../../scripts/harness/peer.js";
import { run, SEA } from "../../scripts/harness/process.js";
import { replayThroughClient, sseBlocks } from "./reference.js";
import { CORPUS, cut, stream, toNdjson, toSse } from "./streams.js";

/**
 * Issue 24 §1, through the real binary: openStream, fixStream and
 * closeStream give what `agui-state fix` gives for the whole stream, however
 * it is cut; streams are limited and abandoned ones do not stay; and the
 * real @ag-ui/client applies the output without a warning.
 */
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261202 : undefined;
// Each run also spawns `agui-state fix`: fewer runs than the in-process property (test/service/streams.test.ts).
const runs = { numRuns: Number(process.env["FC_RUNS"] ?? 25), ...(seed !== undefined ? { seed } : {}) };

const dir = mkdtempSync(path.join(tmpdir(), "agui-state-streams-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * `agui-state fix --state FILE FLAGS` on the whole text, and the same with
 * --report (which the stream methods are, since they count findings): the
 * two must write the same bytes. (They once did not: a delta judged for the
 * report was normalized again after a rollback, which had put removed
 * members back at the end of their object, so a root move's removes came
 * out in another order.)
 */
async function fixWhole(text: string, state: JsonObject, flags: readonly string[]): Promise<string> {
  const file = path.join(dir, "state.json");
  writeFileSync(file, JSON.stringify(state));
  const [plain, reported] = await Promise.all([run(SEA, ["fix", "--state", file, ...flags], text), run(SEA, ["fix", "--report", "--state", file, ...flags], text)]);
  for (const r of [plain, reported]) expect(r.code === 0 || r.code === 1, r.stderr).toBe(true);
  expect(reported.stdout.toString("utf8")).toBe(plain.stdout.toString("utf8"));
  return plain.stdout.toString("utf8");
}

async function feed(peer: Peer, open: Record<string, unknown>, parts: readonly string[]): Promise<{ out: string; summary: Record<string, number> }> {
  const { streamId } = await peer.ok("openStream", open);
  let out = "";
  for (const text of parts) out += (await peer.ok("fixStream", { streamId, text }))["text"] as string;
  const closed = await peer.ok("closeStream", { streamId });
  return { out: out + (closed["text"] as string), summary: closed["summary"] as Record<string, number> };
}

const FLAGS: { params: Record<string, unknown>; flags: string[] }[] = [
  { params: {}, flags: [] },
  { params: { own: ["/toolState"], joinKeys: true }, flags: ["--own", "/toolState", "--join-keys"] },
  { params: { snapshots: "delta" }, flags: ["--snapshots", "delta"] },
];

describe("the stream methods through the binary", () => {
  it("property: any cut of a stream, with any flags, gives what agui-state fix gives for the whole", async () => {
    const peer = startPeer();
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constantFrom(...CORPUS), stream(false)), fc.boolean(), fc.constantFrom(...FLAGS), fc.array(fc.nat(), { maxLength: 10 }), async (c, sse, { params, flags }, at) => {
        const text = sse ? toSse(c.events) : toNdjson(c.events);
        const { out } = await feed(peer, { state: c.state, ...params }, cut(text, at));
        expect(out).toBe(await fixWhole(text, c.state, flags));
      }),
      runs,
    );
    peer.end();
    expect((await peer.waitForExit()).code).toBe(0);
  });

  it("fix and fix --report write the same bytes when a delta judged for the report moves a member onto the root", async () => {
    const text = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"STATE_DELTA","delta":[{"op":"move","from":"/steps","path":""}]}\n\n';
    const out = await fixWhole(text, { steps: { x: 1 }, a: null }, []);
    // §5 rule 7: the root's members in their order, then the new ones.
    expect(out).toContain('"delta":[{"op":"remove","path":"/steps"},{"op":"remove","path":"/a"},{"op":"add","path":"/x","value":1}]');
  });

  it("many interleaved streams on one process do not corrupt each other", async () => {
    const peer = startPeer();
    const cases = CORPUS.slice(0, 16);
    const texts = cases.map((c) => toSse(c.events));
    const ids = await Promise.all(cases.map(async (c) => (await peer.ok("openStream", { state: c.state, own: ["/toolState"] }))["streamId"] as string));
    const outs = cases.map(() => "");
    for (let i = 0; texts.some((t) => i < t.length); i += 11) {
      // All streams' next parts in flight at once.
      const replies = await Promise.all(ids.map((streamId, k) => peer.ok("fixStream", { streamId, text: (texts[k] as string).slice(i, i + 11) })));
      replies.forEach((r, k) => (outs[k] += r["text"] as string));
    }
    const ends = await Promise.all(ids.map((streamId) => peer.ok("closeStream", { streamId })));
    cases.forEach((c, k) => {
      const f = new StreamFixer({ state: structuredClone(c.state), policy: { own: [["toolState"]], snapshots: "pass", joinKeys: false }, onFinding: () => undefined });
      expect(outs[k] + (ends[k]?.["text"] as string), c.name).toBe(f.push(texts[k] as string) + f.end());
    });
    expect(await peer.ok("stats")).toMatchObject({ streams: 0, streamsEvicted: 0 });
  });

  it("the real @ag-ui/client applies the output with no warning, keeps its own keys under own, and ends on the stream's mirror", async () => {
    const peer = startPeer();
    const state: JsonObject = { selectedLayer: "era5", toolState: {} };
    const J = (e: unknown) => JSON.stringify(e);
    const events = [
      J({ type: "RUN_STARTED", threadId: "t", runId: "r" }),
      J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState/raster-ops/dataset", value: "era5" }] }),
      J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState/todos/-", value: "milk" }] }),
      J({ type: "STATE_SNAPSHOT", snapshot: { toolState: { "raster-ops/dataset": "cmip6", todos: ["milk", "eggs"] } } }),
      J({ type: "RUN_FINISHED", threadId: "t", runId: "r" }),
    ];
    const text = toSse(events);
    const { out, summary } = await feed(peer, { state, own: ["/toolState"], joinKeys: true, framing: "sse" }, cut(text, [5, 17, 90, 91, 200, 333]));
    const unrepaired = await replayThroughClient(sseBlocks(text), state);
    // The negative control: as sent, the client warns (the append before /todos) and the snapshot wipes selectedLayer.
    expect(unrepaired.warnings.length).toBeGreaterThan(0);
    expect(unrepaired.state).not.toHaveProperty("selectedLayer");
    const real = await replayThroughClient(sseBlocks(out), state);
    expect(real.warnings).toEqual([]);
    expect(real.error).toBeUndefined();
    expect(real.state).toEqual({ selectedLayer: "era5", toolState: { "raster-ops/dataset": "cmip6", todos: ["milk", "eggs"] } });
    expect(summary).toMatchObject({ events: 5, unfixed: 0 });
    expect(summary["mended"]).toBeGreaterThan(0);
  });
});

describe("limits and errors through the binary", () => {
  it("an event that never ends is held up to 10 MiB, then passed on as it comes: the stream completes and nothing more is held", async () => {
    const peer = startPeer();
    const { streamId } = await peer.ok("openStream", { framing: "sse" });
    const head = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n';
    expect((await peer.ok("fixStream", { streamId, text: head }))["text"]).toBe(head);
    const part = "x".repeat(1024 * 1024);
    const replies: Record<string, unknown>[] = [];
    replies.push(await peer.ok("fixStream", { streamId, text: "data: " + part }));
    for (let i = 0; i < 15; i++) replies.push(await peer.ok("fixStream", { streamId, text: part }));
    const first = replies.findIndex((r) => (r["text"] as string).length > 0);
    // Held up to the limit, then given back at once (one fatal finding, passed on as sent) ...
    expect(first).toBe(9); // "data: " and ten parts: six characters over the limit
    expect((replies[first]?.["text"] as string).length).toBe(6 + 10 * part.length);
    expect(replies[first]).toMatchObject({ passed: 1, mended: 0, discarded: 0, kept: 0 });
    // ... and every part after it comes back whole in its own reply: none of it is held.
    for (const r of replies.slice(first + 1)) expect(r).toEqual({ text: part, findings: [], passed: 0, mended: 0, discarded: 0, kept: 0, pending: 0 });
    const tail = '\n\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n';
    expect((await peer.ok("fixStream", { streamId, text: tail }))["text"]).toBe(tail);
    const closed = await peer.ok("closeStream", { streamId });
    expect(closed).toMatchObject({ text: "", summary: { events: 2, fatal: 1, passed: 1, unfixed: 1 } });
    peer.end();
    expect((await peer.waitForExit()).code).toBe(0);
  });

  it("unknown, closed and evicted streams fail with -32006 and their reason; stats shows open streams and the limits", async () => {
    const peer = startPeer({ args: ["--max-streams", "2"], env: { AGUI_STATE_STREAM_IDLE_MS: "3600000" } });
    expect(await peer.fails("fixStream", { streamId: "s1", text: "" })).toMatchObject({ code: -32006, data: { code: "UNKNOWN_STREAM", streamId: "s1", reason: "never opened" } });
    const a = (await peer.ok("openStream", {}))["streamId"];
    const b = (await peer.ok("openStream", {}))["streamId"];
    await peer.ok("fixStream", { streamId: a, text: "" });
    const c = (await peer.ok("openStream", {}))["streamId"];
    expect(await peer.fails("fixStream", { streamId: b, text: "" })).toMatchObject({ code: -32006, data: { streamId: b, reason: "evicted" } });
    await peer.ok("closeStream", { streamId: a });
    expect(await peer.fails("closeStream", { streamId: a })).toMatchObject({ code: -32006, data: { reason: "closed" } });
    expect(await peer.ok("stats")).toMatchObject({ streams: 1, streamsEvicted: 1, limits: { maxStreams: 2, streamIdleMs: 3600000 } });
    expect(c).toBe("s3");
    peer.end();
    expect((await peer.waitForExit()).code).toBe(0);
  });

  it("a part sent in the same read as the first openStream waits for the pipeline's load; one in the same batch gets -32006 loading and its stream stays open", async () => {
    const run = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n';
    // The ids are s1, s2, ... (§14): a client that guesses one can send its part before openStream's reply.
    const sameRead = startPeer();
    const lines = [["openStream", {}], ["fixStream", { streamId: "s1", text: run }], ["closeStream", { streamId: "s1" }]] as const;
    const answers = Promise.all([1, 2, 3].map((id) => sameRead.expect(id)));
    void sameRead.write(lines.map(([method, params], i) => JSON.stringify({ jsonrpc: "2.0", id: i + 1, method, params }) + "\n").join(""));
    const [opened, fixed, closed] = await answers;
    expect(opened).toMatchObject({ result: { streamId: "s1" } });
    expect(fixed).toMatchObject({ result: { text: run, passed: 0 } });
    expect(closed).toMatchObject({ result: { text: "", summary: { events: 1 } } });
    sameRead.end();
    expect((await sameRead.waitForExit()).code).toBe(0);
    expect(sameRead.stderr).not.toContain("internal error");

    const batched = startPeer();
    const [open, part] = await batched.batch([["openStream", {}], ["fixStream", { streamId: "s1", text: run }]]);
    expect(open).toMatchObject({ result: { streamId: "s1" } });
    expect(part).toMatchObject({ error: { code: -32006, data: { code: "UNKNOWN_STREAM", streamId: "s1", reason: "loading" } } });
    expect(await batched.ok("fixStream", { streamId: "s1", text: run })).toMatchObject({ text: run });
    expect(await batched.ok("closeStream", { streamId: "s1" })).toMatchObject({ summary: { events: 1 } });
    batched.end();
    expect((await batched.waitForExit()).code).toBe(0);
  });

  it("the message-size limit holds for each call: an oversized part is refused, and the stream goes on with smaller ones", async () => {
    const peer = startPeer({ args: ["--max-message-bytes", "1024"] });
    const { streamId } = await peer.ok("openStream", { framing: "ndjson" });
    const big = JSON.stringify({ type: "RUN_STARTED", threadId: "t", runId: "x".repeat(1500) }) + "\n";
    expect(await peer.fails("fixStream", { streamId, text: big })).toMatchObject({ code: -32003, data: { limit: "maxMessageBytes", max: 1024 } });
    const parts = cut(big, [500, 1000]);
    let out = "";
    for (const text of parts) out += (await peer.ok("fixStream", { streamId, text }))["text"] as string;
    expect(out).toBe(big);
    expect((await peer.ok("closeStream", { streamId }))["summary"]).toMatchObject({ events: 1, fatal: 0 });
  });

  it("refuses bad params with -32602 and a stable reason", async () => {
    const peer = startPeer();
    expect(await peer.fails("openStream", { framing: "json" })).toMatchObject({ code: -32602, data: { field: "/framing", reason: "INVALID_VALUE" } });
    expect(await peer.fails("openStream", { own: ["toolState"] })).toMatchObject({ code: -32602, data: { field: "/own/0", reason: "INVALID_POINTER" } });
    expect(await peer.fails("fixStream", { streamId: "s1" })).toMatchObject({ code: -32602, data: { reason: "MISSING" } });
    expect(await peer.fails("closeStream", { streamId: "s1", text: "" })).toMatchObject({ code: -32602, data: { reason: "UNKNOWN_PARAM" } });
  });
});
