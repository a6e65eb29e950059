import { describe, expect, it } from "vitest";
import { COMMANDS, parseLog } from "../../scripts/harness/process.js";
import { startPeer } from "../../scripts/harness/peer.js";

/**
 * protocol/README.md §7, --max-heap: a sidecar driven past a small ceiling
 * evicts its least recently used threads instead of running out of heap.
 * The threads it evicted are exactly the ones stats.evicted counts and the
 * -32001 errors name, they are the least recently used, and every other
 * thread's state is exactly what was written.
 */

const MiB = 1024 * 1024;

/** About 100 KB of JSON that costs V8 about three times that: a thread's worth of rows. */
const stateOf = (i: number) => ({ thread: i, rows: Array.from({ length: 1000 }, (_, j) => ({ j, name: `row ${i}.${j}`, tags: ["a", "b"] })) });

describe.each(COMMANDS)("--max-heap, $name", { timeout: 120_000 }, (command) => {
  it("evicts the least recently used threads near the ceiling, keeps answering, and leaves every other thread as it was", async () => {
    const p = startPeer({ command, args: ["--max-heap", "48MiB"] });
    const threads = 400;
    let clock = 0;
    const lastUse = new Map<number, number>();
    const evicted = new Set<number>();
    // Touch an older thread now and then, so least recently used is not the same as first opened.
    const touch = async (i: number) => {
      const r = await p.call("getState", { threadId: `t${i}` });
      if ("error" in r) {
        expect(r.error).toMatchObject({ code: -32001, data: { code: "UNKNOWN_THREAD", threadId: `t${i}`, reason: "evicted" } });
        evicted.add(i);
      } else {
        expect(r.result).toEqual({ version: 1, state: stateOf(i) });
        lastUse.set(i, ++clock);
      }
    };
    for (let i = 0; i < threads; i++) {
      expect(await p.ok("openRun", { threadId: `t${i}`, state: stateOf(i) })).toMatchObject({ version: 1 });
      lastUse.set(i, ++clock);
      if (i % 7 === 6) await touch((i * 37) % i);
    }
    const stats = await p.ok("stats", {});
    expect(stats["limits"]).toMatchObject({ maxHeapBytes: 48 * MiB });
    // Every thread answers with exactly its state, or with -32001 evicted.
    for (let i = 0; i < threads; i++) if (!evicted.has(i)) await touch(i);
    const after = await p.ok("stats", {});
    expect(after["evicted"]).toBe(stats["evicted"]); // reading evicts nothing
    expect(evicted.size).toBeGreaterThan(threads / 4);
    expect(evicted.size).toBe(stats["evicted"]);
    expect(after["threads"]).toBe(threads - evicted.size);
    // The evicted were the least recently used: each was last used before every survivor.
    const survivors = [...lastUse.keys()].filter((i) => !evicted.has(i));
    const newestEvicted = Math.max(...[...evicted].map((i) => lastUse.get(i) as number));
    const oldestSurvivor = Math.min(...survivors.map((i) => lastUse.get(i) as number));
    expect(newestEvicted).toBeLessThan(oldestSurvivor);
    p.end();
    expect((await p.waitForExit()).code).toBe(0);
    // stderr holds pino JSON lines only, and the warnings account for every eviction.
    const warnings = parseLog(p.stderr).filter((r) => r.msg === "the heap neared --max-heap: evicted the least recently used threads");
    expect(warnings.length).toBeGreaterThan(0);
    expect(warnings.reduce((n, r) => n + (r["evicted"] as number), 0)).toBe(evicted.size);
  });

  it("with no thread to evict, evicts the least recently used open streams, and every other stream goes on as it was", async () => {
    const p = startPeer({ command, args: ["--max-heap", "48MiB"] });
    const streams = 400;
    const started = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n';
    let clock = 0;
    const lastUse = new Map<string, number>();
    const evicted = new Set<string>();
    const part = async (id: string, text: string) => {
      const r = await p.call("fixStream", { streamId: id, text });
      if ("error" in r) {
        expect(r.error).toMatchObject({ code: -32006, data: { code: "UNKNOWN_STREAM", streamId: id, reason: "evicted" } });
        evicted.add(id);
      } else {
        // Every part is one whole event: nothing is left unanswered (the first reply also says where the RUN_STARTED ends).
        expect({ ...(r.result as object), head: undefined }).toEqual({ text, findings: [], passed: 0, mended: 0, discarded: 0, kept: 0, pending: 0, head: undefined });
        lastUse.set(id, ++clock);
      }
    };
    // Each stream's baseline is about 100 KB of JSON, which its mirror holds once its first part came.
    for (let i = 0; i < streams; i++) {
      const { streamId } = await p.ok("openStream", { state: stateOf(i), framing: "sse" });
      lastUse.set(streamId as string, ++clock);
      await part(streamId as string, started);
    }
    for (const id of [...lastUse.keys()]) if (!evicted.has(id)) await part(id, "");
    const stats = await p.ok("stats", {});
    expect(stats["threads"]).toBe(0);
    expect(evicted.size).toBeGreaterThan(streams / 4);
    expect(stats["streamsEvicted"]).toBe(evicted.size);
    expect(stats["streams"]).toBe(streams - evicted.size);
    const survivors = [...lastUse.keys()].filter((id) => !evicted.has(id));
    expect(Math.max(...[...evicted].map((id) => lastUse.get(id) as number))).toBeLessThan(Math.min(...survivors.map((id) => lastUse.get(id) as number)));
    // A survivor still repairs: an append to a missing array gets its array first.
    const delta = 'data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":1}]}\n\n';
    const fixed = await p.ok("fixStream", { streamId: survivors[survivors.length - 1], text: delta });
    expect(fixed).toMatchObject({ mended: 1 });
    p.end();
    expect((await p.waitForExit()).code).toBe(0);
    const warnings = parseLog(p.stderr).filter((r) => r.msg === "the heap neared --max-heap: evicted the least recently used threads, then open streams");
    expect(warnings.reduce((n, r) => n + (r["streamsEvicted"] as number), 0)).toBe(evicted.size);
  });
});
