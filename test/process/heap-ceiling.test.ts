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
});
