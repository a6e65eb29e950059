import { describe, expect, it } from "vitest";
import type { Cursor, Page, RunStart } from "../../src/resume/log.js";
import { DEFAULT_MAX_RUNS, MemoryLog, startBytes, type LogCaps } from "../../src/resume/memory-log.js";
import { loggedBlocks } from "./logged-blocks.js";

/**
 * The memory store's caps, retention and eviction (protocol/README.md §16, caps; issue 38 item 2),
 * all against the injected clock, advanced by hand: no test here reads the wall clock.
 */
const start = (threadId: string, prelude: string[] = []): RunStart => ({ threadId, path: "/agent", credential: "", status: 200, headers: { "content-type": "text/event-stream" }, prelude, opening: `${threadId}.0.open` });
const event = (run: string, n: number, size: number): string => {
  const head = `id: ${run}.${n}.x\ndata: `;
  return `${head}${"y".repeat(Math.max(0, size - head.length - 2))}\n\n`;
};
const utf8 = (s: string): number => Buffer.byteLength(s);

/** A log with a clock the test moves, and a count of the clock's reads. */
function clocked(caps: Partial<LogCaps>): { log: MemoryLog; clock: { t: number; reads: number } } {
  const clock = { t: 0, reads: 0 };
  const log = new MemoryLog({ retentionMs: 1000, maxRunBytes: 1e9, maxTotalBytes: 1e10, ...caps }, () => (clock.reads++, clock.t));
  return { log, clock };
}

/** A run begun with its start and `events` events of `size` bytes each. */
async function filed(log: MemoryLog, run: string, events = 0, size = 100, prelude: string[] = []): Promise<number> {
  await log.begin(run, start(run, prelude));
  const blocks = Array.from({ length: events }, (_, i) => event(run, i + 1, size));
  if (events > 0) log.append(run, loggedBlocks(blocks));
  return startBytes(start(run, prelude)) + blocks.reduce((n, b) => n + utf8(b), 0);
}

const kept = async (log: MemoryLog, runs: string[]): Promise<string[]> => {
  const out: string[] = [];
  for (const r of runs) if (await log.find(r)) out.push(r);
  return out;
};

/** Steps of every Map iteration while `f` runs: a sweep of every run would take one per run. */
async function mapSteps(f: () => Promise<unknown>): Promise<number> {
  const proto = Object.getPrototypeOf(new Map().values()) as { next: () => unknown };
  const next = proto.next;
  let steps = 0;
  proto.next = function (this: unknown) {
    steps++;
    return next.call(this);
  };
  try {
    await f();
  } finally {
    proto.next = next;
  }
  return steps;
}

describe("MemoryLog caps", () => {
  it("keeps an ended run for the retention, by the injected clock, then forgets it (not counted as evicted)", async () => {
    const { log, clock } = clocked({ retentionMs: 1000 });
    await filed(log, "a", 3);
    const reader = await log.open("a", 1);
    clock.t = 500;
    log.end("a", "finished");
    clock.t = 1499;
    expect((await log.find("a"))?.ended).toBe("finished");
    expect(await log.latest("a", "/agent")).toBe("a");
    // A cursor still reading when the retention is over gets evicted, its events gone with the run.
    clock.t = 1500;
    expect(await reader.read(1 << 16)).toEqual({ end: "evicted" });
    expect(await log.find("a")).toBeUndefined();
    expect(await log.latest("a", "/agent")).toBeUndefined();
    expect(await log.idAt("a", 0)).toBeUndefined();
    expect(log.stats()).toEqual({ runs: 0, bytes: 0, evicted: 0 });
    expect(await (await log.open("a", 0)).read(1)).toEqual({ end: "evicted" });
  });

  it("a live run never expires, however long it lives", async () => {
    const { log, clock } = clocked({ retentionMs: 1000 });
    await filed(log, "a", 1);
    clock.t = 1e9;
    await filed(log, "b", 1);
    expect(await kept(log, ["a", "b"])).toEqual(["a", "b"]);
  });

  it("counts the prelude, in UTF-8 bytes, against the run's cap: past it the run is unresumable and keeps nothing", async () => {
    const prelude = ["é".repeat(3000)]; // 6,000 bytes in 3,000 characters
    const { log } = clocked({ maxRunBytes: 10_000 });
    const startCost = startBytes(start("a", prelude));
    expect(startCost).toBeGreaterThan(6000);
    await log.begin("a", start("a", prelude));
    expect(log.stats().bytes).toBe(startCost);
    const fits = event("a", 1, 10_000 - startCost);
    log.append("a", loggedBlocks([fits]));
    expect(log.stats().bytes).toBe(10_000);
    const reader = await log.open("a", 1);
    const waiting = reader.read(1 << 16);
    log.append("a", loggedBlocks([event("a", 2, 10)]));
    expect(await waiting).toEqual({ end: "unresumable" });
    expect(await log.find("a")).toBeUndefined();
    expect(log.stats()).toEqual({ runs: 0, bytes: 0, evicted: 0 });
  });

  it("files no run whose start alone is past the run's cap, and its thread then has no latest run to reload", async () => {
    const { log } = clocked({ maxRunBytes: 10_000 });
    await log.begin("old", start("t"));
    expect(await log.latest("t", "/agent")).toBe("old");
    await log.begin("big", start("t", ["x".repeat(10_001)]));
    expect(await log.find("big")).toBeUndefined();
    expect(await log.latest("t", "/agent")).toBeUndefined();
    log.append("big", loggedBlocks([event("big", 1, 100)]));
    expect(log.stats()).toEqual({ runs: 1, bytes: startBytes(start("t")), evicted: 0 });
  });

  it("past the total, evicts the least recently used runs, events or none: a run read recently survives", async () => {
    const { log } = clocked({ maxTotalBytes: 10_000 });
    const a = await filed(log, "a", 10, 200); // ~2 KB each
    const b = await filed(log, "b", 0, 0, ["p".repeat(2000)]); // no events: its prelude alone
    const c = await filed(log, "c", 10, 200);
    log.end("c", "finished");
    // a is read: the most recently used now.
    const reader = await log.open("a", 0);
    await reader.read(100);
    expect(log.stats().bytes).toBe(a + b + c);
    const d = await filed(log, "d", 30, 200); // ~6 KB: b and c must go, in that order
    expect(await kept(log, ["a", "b", "c", "d"])).toEqual(["a", "d"]);
    expect(log.stats()).toEqual({ runs: 2, bytes: a + d, evicted: 2 });
    // Writing counts as use too: appending to a makes d the oldest, and d goes when a outgrows the room.
    log.append("a", loggedBlocks(Array.from({ length: 20 }, (_, i) => event("a", 11 + i, 200))));
    expect(await kept(log, ["a", "d"])).toEqual(["a"]);
    expect(log.stats().evicted).toBe(3);
  });

  it("holds the number of runs to maxRuns, the least recently used evicted first, runs with no events like any other", async () => {
    const { log } = clocked({ maxRuns: 3 });
    for (const r of ["a", "b", "c"]) await log.begin(r, start(r));
    expect(await log.find("a")).toBeDefined(); // find is no use: a stays the oldest
    const reader = await log.open("a", 0); // open is
    await log.begin("d", start("d"));
    expect(await kept(log, ["a", "b", "c", "d"])).toEqual(["a", "c", "d"]);
    await log.begin("e", start("e"));
    expect(await kept(log, ["a", "b", "c", "d", "e"])).toEqual(["a", "d", "e"]);
    expect(log.stats()).toMatchObject({ runs: 3, evicted: 2 });
    expect(await log.readers("a")).toBe(1);
    reader.close();
  });

  it("holds the runs to DEFAULT_MAX_RUNS when maxRuns is left out", async () => {
    const { log } = clocked({});
    for (let i = 0; i <= DEFAULT_MAX_RUNS; i++) await log.begin(`r${i}`, start(`r${i}`));
    expect(log.stats()).toMatchObject({ runs: 10_000, evicted: 1 });
    expect(await kept(log, ["r0", "r1", "r10000"])).toEqual(["r1", "r10000"]);
  });

  it("expiry looks only at the runs that expired, not at 10,000 live ones nor at the ended ones still kept", async () => {
    const { log, clock } = clocked({ retentionMs: 1000, maxRuns: 20_000 });
    for (let i = 0; i < 5; i++) {
      await filed(log, `old${i}`, 1);
      log.end(`old${i}`, "finished");
    }
    clock.t = 500;
    for (let i = 0; i < 1000; i++) {
      await filed(log, `recent${i}`, 1);
      log.end(`recent${i}`, "cancelled");
    }
    for (let i = 0; i < 10_000; i++) await filed(log, `live${i}`, 1);
    clock.t = 1200; // the five old runs are past their retention, the others not
    clock.reads = 0;
    // One clock read and the five expired runs, plus the one that stops the look: not 11,005 runs.
    expect(await mapSteps(() => log.begin("new", start("new")))).toBeLessThanOrEqual(7);
    expect(clock.reads).toBe(1);
    expect(await kept(log, ["old0", "old4", "recent0", "recent999", "live0", "live9999", "new"])).toEqual(["recent0", "recent999", "live0", "live9999", "new"]);
    // Nothing more to expire: a lookup takes one step, an append none.
    expect(await mapSteps(() => log.find("live5"))).toBeLessThanOrEqual(1);
    expect(await mapSteps(() => Promise.resolve(log.append("live5", loggedBlocks([event("live5", 2, 100)]))))).toBe(0);
    expect(log.stats().runs).toBe(11_001);
  });

  it("counts the bytes readers hold in stats and against the total, evicting the least recently used runs", async () => {
    const { log } = clocked({ maxTotalBytes: 10_000 });
    const a = await filed(log, "a", 10, 200);
    const b = await filed(log, "b", 10, 200);
    const reader = await log.open("a", 0);
    const waiting: Promise<Page> = (async () => {
      await reader.read(1 << 20);
      return reader.read(1 << 20);
    })();
    log.hold(1000);
    expect(log.stats()).toEqual({ runs: 2, bytes: a + b + 1000, evicted: 0 });
    log.hold(10_000 - a - b); // 1,000 past the total: b goes, the oldest (a was read since)
    expect(await kept(log, ["a", "b"])).toEqual(["a"]);
    expect(log.stats()).toEqual({ runs: 1, bytes: 11_000 - b, evicted: 1 });
    log.hold(2000); // and then a, whose reader ends
    expect(await waiting).toEqual({ end: "evicted" });
    expect(log.stats()).toEqual({ runs: 0, bytes: 13_000 - a - b, evicted: 2 });
    log.hold(-(13_000 - a - b));
    expect(log.stats()).toEqual({ runs: 0, bytes: 0, evicted: 2 });
  });

  it("shed() drops the least recently used runs until about the bytes asked for are freed, the most recent kept", async () => {
    const { log, clock } = clocked({ retentionMs: 1000 });
    const costs: Record<string, number> = {};
    for (const r of ["a", "b", "c", "d"]) costs[r] = await filed(log, r, 10, 1000);
    const reader: Cursor = await log.open("b", 10); // b is the most recent
    const waiting = reader.read(1);
    // a and c: the first run past the bytes asked for is the last dropped.
    expect(log.shed((costs["a"] as number) + 1)).toEqual(["a", "c"]);
    expect(await kept(log, ["a", "b", "c", "d"])).toEqual(["b", "d"]);
    expect(log.stats()).toEqual({ runs: 2, bytes: (costs["b"] as number) + (costs["d"] as number), evicted: 2 });
    expect(log.shed(1e9)).toEqual(["d"]);
    expect(log.shed(1e9)).toEqual([]);
    expect(await kept(log, ["b"])).toEqual(["b"]);
    // What expired is freed first, and is not among the runs shed.
    log.end("b", "finished");
    expect(await waiting).toEqual({ end: "finished" });
    clock.t = 1000;
    expect(log.shed(1)).toEqual([]);
    expect(log.stats()).toEqual({ runs: 0, bytes: 0, evicted: 3 });
  });

  it("close() ends every waiting read and forgets every run", async () => {
    const { log } = clocked({});
    await filed(log, "a", 1);
    const reader = await log.open("a", 1);
    const waiting = reader.read(100);
    await log.close();
    expect(await waiting).toEqual({ end: "evicted" });
    expect(log.stats()).toEqual({ runs: 0, bytes: 0, evicted: 0 });
  });
});
