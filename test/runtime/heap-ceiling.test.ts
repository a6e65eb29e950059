import pino from "pino";
import { describe, expect, it } from "vitest";
import { COOL_DOWN, effectiveCeiling, HeapCeiling, HIGH, TARGET, v8Heap, type HeapProbe } from "../../src/runtime/heap-ceiling.js";
import { GROWING_PERCENT, HeapTuning, LARGE_HEAP, LARGE_HEAP_GROWING_PERCENT, LARGE_MESSAGE, SMALL_AGAIN } from "../../src/runtime/heap-tuning.js";
import { MemoryLog } from "../../src/resume/memory-log.js";
import { StateService } from "../../src/service/state-service.js";
import { StreamService } from "../../src/service/stream-service.js";
import { LOADED_PIPELINE } from "../../scripts/harness/paired.js";
import { fail, ok } from "../../scripts/harness/outcome.js";

const MB = 1024 * 1024;

/**
 * A heap that costs `perByte` heap bytes per state byte of the threads still
 * held, over a fixed floor, plus garbage that a collection clears.
 */
function fakeHeap(service: StateService, floor: number, perByte: number): HeapProbe & { garbage: number; collections: number } {
  const heap = {
    garbage: 0,
    collections: 0,
    used: () => floor + perByte * service.stateBytes() + heap.garbage,
    collect: () => {
      heap.collections++;
      heap.garbage = 0;
      return true;
    },
  };
  return heap;
}

const silent = pino({ level: "silent" });
const state = (i: number) => ({ blob: "x".repeat(100_000), i });

function setup(threads: number) {
  const service = new StateService({ limits: { maxThreads: 1000, maxHeapBytes: 64 * MB } });
  for (let i = 0; i < threads; i++) ok(service.openRun({ threadId: `t${i}`, state: state(i) }));
  return service;
}

describe("HeapCeiling", () => {
  it("does nothing below HIGH × the ceiling: no collection, no eviction", () => {
    const service = setup(10); // ~1 MB of state, 3 MB of heap
    const heap = fakeHeap(service, 4 * MB, 3);
    const ceiling = new HeapCeiling(64 * MB, heap, service, silent, 4 * MB);
    heap.garbage = HIGH * 64 * MB - heap.used() - 1;
    expect(ceiling.check()).toEqual([]);
    expect(heap.collections).toBe(0);
    expect(ok(service.stats(0)).threads).toBe(10);
  });

  it("collects first, and evicts nothing when the collection alone brings the heap under TARGET", () => {
    const service = setup(10);
    const heap = fakeHeap(service, 4 * MB, 3);
    const ceiling = new HeapCeiling(64 * MB, heap, service, silent, 4 * MB);
    heap.garbage = 64 * MB; // garbage, not live data
    expect(ceiling.check()).toEqual([]);
    expect(heap.collections).toBe(1);
    expect(ok(service.stats(0)).evicted).toBe(0);
  });

  it("evicts nothing when the collection finds the live heap between TARGET and HIGH, where the last eviction may have left it", () => {
    const service = setup(10);
    // Live data halfway between TARGET and HIGH of the ceiling, and garbage enough to look past it.
    const heap = fakeHeap(service, ((TARGET + HIGH) / 2) * 64 * MB - 3 * service.stateBytes(), 3);
    const ceiling = new HeapCeiling(64 * MB, heap, service, silent, 4 * MB);
    heap.garbage = 64 * MB;
    expect(ceiling.check()).toEqual([]);
    expect(heap.collections).toBe(1);
    expect(ok(service.stats(0)).evicted).toBe(0);
  });

  it("evicts the least recently used threads, oldest first, until the live heap is at TARGET × the ceiling", () => {
    const service = setup(200); // ~20 MB of state, ~60 MB of heap with the floor: over HIGH × 64 MB
    ok(service.getState({ threadId: "t0" })); // t0 is now the most recently used
    const heap = fakeHeap(service, 4 * MB, 3);
    const ceiling = new HeapCeiling(64 * MB, heap, service, silent, 4 * MB);
    const before = heap.used();
    expect(before).toBeGreaterThan(HIGH * 64 * MB);
    const evicted = ceiling.check();
    expect(evicted[0]).toBe("t1");
    expect(evicted).toEqual(evicted.map((_, i) => `t${i + 1}`));
    expect(heap.used()).toBeLessThanOrEqual(TARGET * 64 * MB);
    // Not much more than needed: one thread's worth of slack.
    expect(heap.used()).toBeGreaterThan(TARGET * 64 * MB - 3 * 100_100);
    expect(ok(service.stats(0)).evicted).toBe(evicted.length);
    for (const id of evicted) expect(fail(service.getState({ threadId: id })).data).toMatchObject({ code: "UNKNOWN_THREAD", reason: "evicted" });
    expect(ok(service.getState({ threadId: "t0" })).state).toEqual(state(0));
    expect(ok(service.getState({ threadId: "t199" })).state).toEqual(state(199));
  });

  it("keeps the most recently used thread even when it alone is over the ceiling", () => {
    const service = setup(3);
    const heap = fakeHeap(service, 4 * MB, 300); // each thread costs 30 MB of heap here
    const ceiling = new HeapCeiling(64 * MB, heap, service, silent, 4 * MB);
    expect(ceiling.check()).toEqual(["t0", "t1"]);
    expect(ok(service.getState({ threadId: "t2" })).state).toEqual(state(2));
    expect(ceiling.check()).toEqual([]);
  });

  it("evicts the least recently used open streams once the threads are not enough, the most recent kept", () => {
    const service = setup(2); // two threads of ~100 KB: not nearly enough to free
    const streams = new StreamService({ limits: { maxStreams: 100 }, pipeline: LOADED_PIPELINE });
    const ids = Array.from({ length: 20 }, (_, i) => ok(streams.openStream({ state: { blob: "y".repeat(1_000_000), i } })).streamId);
    for (const streamId of ids) ok(streams.fixStream({ streamId, text: 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n' }));
    ok(streams.fixStream({ streamId: ids[0] as string, text: "" })); // s1 is now the most recently used
    const heap = { used: () => 4 * MB + 3 * (service.stateBytes() + streams.stateBytes()), collect: () => true };
    const logged: { msg: string; fields: Record<string, unknown> }[] = [];
    const log = { warn: (fields: Record<string, unknown>, msg: string) => void logged.push({ msg, fields }) } as unknown as typeof silent;
    const ceiling = new HeapCeiling(64 * MB, heap, service, log, 4 * MB, streams);
    expect(heap.used()).toBeGreaterThan(HIGH * 64 * MB);
    const evicted = ceiling.check();
    // The threads first (all but the most recent), then streams, oldest first, s1 (used last) not among them.
    expect(evicted.slice(0, 1)).toEqual(["t0"]);
    const gone = evicted.slice(1);
    expect(gone).toEqual(gone.map((_, i) => `s${i + 2}`));
    expect(heap.used()).toBeLessThanOrEqual(TARGET * 64 * MB);
    expect(heap.used()).toBeGreaterThan(TARGET * 64 * MB - 3 * 1_000_100);
    for (const streamId of gone) expect(fail(streams.fixStream({ streamId, text: "" })).data).toMatchObject({ code: "UNKNOWN_STREAM", reason: "evicted" });
    expect(ok(streams.fixStream({ streamId: "s1", text: "" })).text).toBe("");
    expect(ok(streams.fixStream({ streamId: "s20", text: "" })).text).toBe("");
    expect(streams.stats()).toMatchObject({ streams: 20 - gone.length, streamsEvicted: gone.length });
    expect(logged).toEqual([{ msg: "the heap neared --max-heap: evicted the least recently used threads, then open streams", fields: expect.objectContaining({ evicted: 1, streamsEvicted: gone.length, firstStream: "s2" }) as unknown }]);
  });

  /** Threads, runs of a memory run log (one of `runBytes` each, by its prelude) and open streams, all over HIGH of 64 MB together. */
  async function withRuns(runs: number, streamCount: number) {
    const service = setup(2);
    const runLog = new MemoryLog({ retentionMs: 1000, maxRunBytes: 1e9, maxTotalBytes: 1e10 }, () => 0);
    for (let i = 0; i < runs; i++) await runLog.begin(`r${i}`, { threadId: `t${i}`, path: "/agent", credential: "", status: 200, headers: {}, prelude: ["p".repeat(1_000_000)], opening: `r${i}.0.x` });
    const streams = new StreamService({ limits: { maxStreams: 100 }, pipeline: LOADED_PIPELINE });
    const ids = Array.from({ length: streamCount }, (_, i) => ok(streams.openStream({ state: { blob: "y".repeat(1_000_000), i } })).streamId);
    // Threads and streams cost 3 heap bytes a byte; the run log 1 (at most, in the process: its sealed events are off the heap).
    const heap = { used: () => 4 * MB + 3 * (service.stateBytes() + streams.stateBytes()) + runLog.stats().bytes, collect: () => true };
    const logged: { msg: string; fields: Record<string, unknown> }[] = [];
    const log = { warn: (fields: Record<string, unknown>, msg: string) => void logged.push({ msg, fields }) } as unknown as typeof silent;
    const ceiling = new HeapCeiling(64 * MB, heap, service, log, 4 * MB, streams, runLog);
    expect(heap.used()).toBeGreaterThan(HIGH * 64 * MB);
    return { runLog, streams, ids, heap, logged, ceiling };
  }

  it("sheds the run log's least recently used runs once the threads are not enough, before any open stream", async () => {
    const { runLog, streams, heap, logged, ceiling } = await withRuns(45, 5);
    const evicted = ceiling.check();
    expect(evicted[0]).toBe("t0");
    const runs = evicted.slice(1);
    expect(runs.length).toBeGreaterThan(10);
    expect(runs).toEqual(runs.map((_, i) => `r${i}`));
    // Nothing more to do at the next check, and every stream kept.
    expect(heap.used()).toBeLessThan(HIGH * 64 * MB);
    expect(streams.stats()).toMatchObject({ streams: 5, streamsEvicted: 0 });
    expect(runLog.stats()).toMatchObject({ runs: 45 - runs.length, evicted: runs.length });
    expect(await runLog.find("r0")).toBeUndefined();
    expect(await runLog.find("r44")).toBeDefined();
    expect(logged).toEqual([{ msg: "the heap neared --max-heap: evicted the least recently used threads, then runs of the run log", fields: expect.objectContaining({ evicted: 1, runsEvicted: runs.length, firstRun: "r0" }) as unknown }]);
  });

  it("sheds open streams only for what the threads and the runs could not give", async () => {
    const { runLog, heap, logged, ceiling } = await withRuns(5, 20);
    const evicted = ceiling.check();
    // The most recent run is kept, as the most recent thread and stream are.
    expect(evicted.slice(0, 5)).toEqual(["t0", "r0", "r1", "r2", "r3"]);
    const gone = evicted.slice(5);
    expect(gone.length).toBeGreaterThan(0);
    expect(gone).toEqual(gone.map((_, i) => `s${i + 1}`));
    // Near TARGET: the run log's heap, counted in the heap per thread and stream byte, makes that a little dear.
    expect(heap.used()).toBeLessThan(HIGH * 64 * MB);
    expect(heap.used()).toBeLessThan((TARGET + 0.02) * 64 * MB);
    expect(runLog.stats().runs).toBe(1);
    expect(logged).toEqual([{ msg: "the heap neared --max-heap: evicted the least recently used threads, then runs of the run log, then open streams", fields: expect.objectContaining({ runsEvicted: 4, streamsEvicted: gone.length }) as unknown }]);
  });

  it("weighs an open stream by its mirror and by the unfinished event it holds", () => {
    const streams = new StreamService({ limits: {}, pipeline: LOADED_PIPELINE });
    const { streamId } = ok(streams.openStream({ state: { blob: "y".repeat(100_000) } }));
    const baseline = streams.stateBytes();
    expect(baseline).toBeGreaterThan(100_000);
    ok(streams.fixStream({ streamId, text: 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n' }));
    expect(streams.stateBytes()).toBe(baseline);
    ok(streams.fixStream({ streamId, text: "data: " + "z".repeat(500_000) }));
    expect(streams.stateBytes()).toBe(baseline + 2 * 500_006);
    ok(streams.fixStream({ streamId, text: '\n\ndata: {"type":"STATE_SNAPSHOT","snapshot":{}}\n\n' }));
    expect(streams.stateBytes()).toBeLessThan(10);
  });

  it("between HIGH and the ceiling, forces a collection at most once per COOL_DOWN checks", () => {
    const service = setup(10);
    const heap = fakeHeap(service, 4 * MB, 3);
    const ceiling = new HeapCeiling(64 * MB, heap, service, silent, 4 * MB);
    const between = () => (heap.garbage = 0.95 * 64 * MB - heap.used() + heap.garbage);
    between();
    ceiling.check();
    expect(heap.collections).toBe(1);
    for (let i = 1; i < COOL_DOWN; i++) {
      between();
      ceiling.check();
    }
    expect(heap.collections).toBe(1);
    between();
    ceiling.check();
    expect(heap.collections).toBe(2);
    // Over the ceiling itself, it looks at once.
    heap.garbage = 64 * MB;
    ceiling.check();
    expect(heap.collections).toBe(3);
  });
});

describe("effectiveCeiling", () => {
  it("keeps a ceiling under 80% of V8's own limit, and lowers one above it", () => {
    expect(effectiveCeiling(1024 * MB, 4096 * MB)).toEqual({ ceiling: 1024 * MB, clamped: false });
    expect(effectiveCeiling(4096 * MB, 4096 * MB)).toEqual({ ceiling: Math.floor(4096 * MB * 0.8), clamped: true });
  });
});

describe("v8Heap", () => {
  it("forces a real full collection, with no --expose-gc on the command line", () => {
    const heap = v8Heap();
    const holder: { garbage?: unknown[] } = { garbage: Array.from({ length: 200_000 }, (_, i) => ({ i, s: `garbage ${i}` })) };
    const withGarbage = heap.used();
    expect(holder.garbage?.length).toBe(200_000);
    delete holder.garbage;
    expect(heap.collect()).toBe(true);
    expect(heap.used()).toBeLessThan(withGarbage - 8 * MB);
  });
});

describe("HeapTuning (issue 41)", () => {
  it("gives the young and the old generation V8's own growth back once, at the first message of LARGE_MESSAGE characters or more", () => {
    const set: string[] = [];
    const tuning = new HeapTuning((flags) => set.push(flags));
    tuning.message(LARGE_MESSAGE - 1);
    tuning.message(10);
    expect(set).toEqual([]);
    tuning.message(LARGE_MESSAGE);
    tuning.message(LARGE_MESSAGE * 4);
    expect(set).toEqual(["--semi-space-growth-factor=2", "--heap-growing-percent=0"]);
  });

  it("holds a large heap's old generation closer to its live data, and lets it go again well below (issue 42)", () => {
    const set: string[] = [];
    const tuning = new HeapTuning((flags) => set.push(flags));
    tuning.heapUsed(LARGE_HEAP - 1);
    expect(set).toEqual([]);
    tuning.heapUsed(LARGE_HEAP);
    tuning.heapUsed(LARGE_HEAP * 2);
    // Between the two marks it stays as it is, whichever way the heap moves.
    tuning.heapUsed(SMALL_AGAIN);
    expect(set).toEqual([`--heap-growing-percent=${LARGE_HEAP_GROWING_PERCENT}`]);
    tuning.heapUsed(SMALL_AGAIN - 1);
    tuning.heapUsed(1);
    tuning.heapUsed(LARGE_HEAP - 1);
    expect(set).toEqual([`--heap-growing-percent=${LARGE_HEAP_GROWING_PERCENT}`, `--heap-growing-percent=${GROWING_PERCENT}`]);
  });

  it("after a large message, a large heap still takes the large heap's step, and V8's own growth comes back under SMALL_AGAIN", () => {
    const set: string[] = [];
    const tuning = new HeapTuning((flags) => set.push(flags));
    tuning.message(LARGE_MESSAGE);
    tuning.heapUsed(LARGE_HEAP);
    tuning.heapUsed(SMALL_AGAIN - 1);
    expect(set).toEqual(["--semi-space-growth-factor=2", "--heap-growing-percent=0", `--heap-growing-percent=${LARGE_HEAP_GROWING_PERCENT}`, "--heap-growing-percent=0"]);
    // The first large message while the heap is large lets the young generation grow, and leaves the old one's step alone.
    const later: string[] = [];
    const other = new HeapTuning((flags) => later.push(flags));
    other.heapUsed(LARGE_HEAP);
    other.message(LARGE_MESSAGE);
    expect(later).toEqual([`--heap-growing-percent=${LARGE_HEAP_GROWING_PERCENT}`, "--semi-space-growth-factor=2"]);
    other.heapUsed(1);
    expect(later.at(-1)).toBe("--heap-growing-percent=0");
  });

  it("hears the heap through the ceiling's own reading: one V8 statistics read per chunk, as before", () => {
    const set: string[] = [];
    let reads = 0;
    const tuning = new HeapTuning((flags) => set.push(flags));
    const probe = tuning.watch({ used: () => (reads++, LARGE_HEAP), collect: () => false });
    expect(probe.used()).toBe(LARGE_HEAP);
    expect(reads).toBe(1);
    expect(set).toEqual([`--heap-growing-percent=${LARGE_HEAP_GROWING_PERCENT}`]);
  });
});
