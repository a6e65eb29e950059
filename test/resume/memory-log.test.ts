import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Cursor, Page, RunEnd } from "../../src/resume/log.js";
import { MemoryLog, startBytes } from "../../src/resume/memory-log.js";
import { idOfBlock } from "../../src/resume/logged.js";
import { blocksOf, loggedBlocks } from "./logged-blocks.js";

/**
 * The memory store keeps a run's events packed (packed.ts) and hands them to cursors page by page
 * (memory-log.ts, protocol/README.md §16): whatever the parts they came in, whatever characters
 * they hold and whatever the page size, a cursor from any event gets exactly the events after it,
 * each with its id, cut where each ends, then the run's end; an id is found at its number.
 * The caps, retention and eviction are memory-log-caps.test.ts's.
 */
const START = { threadId: "t", path: "/agent", credential: "c", status: 200, headers: {}, prelude: [], opening: "run.0.open" };
const CAPS = { retentionMs: 1000, maxRunBytes: 1e9, maxTotalBytes: 1e10 };

const texts = fc.constantFrom("", "hello", "naïve café", "☕ 🛰 emoji", "日本語のテキスト", "x".repeat(5000), '"quoted" \\ back');
const block = (n: number, t: string): string => `id: run.${n}.n${n - 1}\ndata: ${JSON.stringify({ type: "TEXT_MESSAGE_CONTENT", delta: t })}\n\n`;
const utf8 = (s: string): number => Buffer.byteLength(s);

/** The microtask check: whether the read has answered (it answers at once when it has a page), without a clock. */
async function settled(p: Promise<Page>): Promise<boolean> {
  const pending = Symbol("pending");
  return (await Promise.race([p, Promise.resolve(pending)])) !== pending;
}

/** Pages until the cursor is caught up on a live run (its read then waits: returned) or the end. */
async function drain(c: Cursor, maxBytes: number): Promise<{ blocks: string[]; pages: string[][]; end: RunEnd | undefined; waiting: Promise<Page> | undefined }> {
  const blocks: string[] = [];
  const pages: string[][] = [];
  for (;;) {
    const p = c.read(maxBytes);
    if (!(await settled(p))) return { blocks, pages, end: undefined, waiting: p };
    const page = await p;
    if (page.end !== undefined) return { blocks, pages, end: page.end, waiting: undefined };
    const got = blocksOf(page.events);
    expect(page.events.text).toBe(got.join(""));
    pages.push(got);
    blocks.push(...got);
  }
}

describe("MemoryLog cursors", () => {
  it("a cursor from any event gets exactly the events after it, across seals, in any characters and any page size", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(texts, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        fc.boolean(),
        fc.integer({ min: 1, max: 20_000 }),
        async (parts, ended, readEach, maxBytes) => {
          const log = new MemoryLog(CAPS, () => 0);
          await log.begin("run", START);
          const all: string[] = [];
          for (const part of parts) {
            log.append("run", loggedBlocks(part.map((t) => (all.push(block(all.length + 1, t)), all[all.length - 1] as string))));
            // An id read between appends: reads never seal, so the events below sit in open parts and segments alike.
            if (readEach) expect(await log.idAt("run", all.length)).toBe(`run.${all.length}.n${all.length - 1}`);
          }
          if (ended) log.end("run", "finished");
          for (let after = 0; after <= all.length; after++) {
            const c = await log.open("run", after);
            expect(await log.readers("run")).toBe(1);
            const got = await drain(c, maxBytes);
            expect(got.blocks).toEqual(all.slice(after));
            // Whole events, as many as fit, at least one.
            for (const page of got.pages) {
              if (page.length > 1) expect(utf8(page.join(""))).toBeLessThanOrEqual(maxBytes);
              expect(page.length).toBeGreaterThan(0);
            }
            expect(got.end).toBe(ended ? "finished" : undefined);
            c.close();
            if (got.waiting) expect(await got.waiting).toEqual({ end: "cancelled" });
            expect(await log.readers("run")).toBe(0);
          }
          for (let seq = 1; seq <= all.length; seq++) expect(await log.idAt("run", seq)).toBe(`run.${seq}.n${seq - 1}`);
          expect(await log.idAt("run", all.length + 1)).toBeUndefined();
          expect(await log.idAt("run", 0)).toBe(START.opening);
          expect(log.stats().bytes).toBe(startBytes(START) + all.reduce((n, b) => n + utf8(b), 0));
          expect((await log.find("run"))?.events).toBe(all.length);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("cursors read as a run is written: each gets, concatenated, everything appended after its start, then the end", async () => {
    type Op = { kind: "append"; part: string[] } | { kind: "read"; cursor: number; maxBytes: number } | { kind: "open" };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ kind: fc.constant("append" as const), part: fc.array(texts, { minLength: 1, maxLength: 4 }) }),
      fc.record({ kind: fc.constant("read" as const), cursor: fc.nat(), maxBytes: fc.integer({ min: 1, max: 12_000 }) }),
      fc.record({ kind: fc.constant("open" as const) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 40 }), fc.constantFrom<RunEnd>("finished", "cancelled", "unresumable"), async (ops, reason) => {
        const log = new MemoryLog(CAPS, () => 0);
        await log.begin("run", START);
        const all: string[] = [];
        const cursors: { c: Cursor; from: number; got: string[]; waiting: Promise<Page> | undefined }[] = [];
        const take = (k: (typeof cursors)[number], page: Page): void => {
          k.waiting = undefined;
          if (page.events) k.got.push(page.events.text);
        };
        for (const o of ops) {
          if (o.kind === "append") {
            log.append("run", loggedBlocks(o.part.map((t) => (all.push(block(all.length + 1, t)), all[all.length - 1] as string))));
          } else if (o.kind === "open") {
            cursors.push({ c: await log.open("run", all.length), from: all.length, got: [], waiting: undefined });
          } else if (cursors.length > 0) {
            const k = cursors[o.cursor % cursors.length] as (typeof cursors)[number];
            // A waiting read was woken by an append, or still waits: only one read at a time.
            if (k.waiting && (await settled(k.waiting))) take(k, await k.waiting);
            if (!k.waiting) {
              const p = k.c.read(o.maxBytes);
              if (await settled(p)) take(k, await p);
              else k.waiting = p;
            }
          }
        }
        log.end("run", reason);
        for (const k of cursors) {
          if (k.waiting) take(k, await k.waiting);
          const rest = await drain(k.c, 64 * 1024);
          k.got.push(rest.blocks.join(""));
          expect(k.got.join("")).toBe(all.slice(k.from).join(""));
          expect(rest.end).toBe(reason);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a waiting read is woken by an append, then by the end", async () => {
    const log = new MemoryLog(CAPS, () => 0);
    await log.begin("run", START);
    const e = (n: number): string => `id: run.${n}.x\ndata: {"n":${n}}\n\n`;
    log.append("run", loggedBlocks([e(1), e(2)]));
    const c = await log.open("run", 1);
    const first = await c.read(1 << 16);
    expect(first.events && blocksOf(first.events).map(idOfBlock)).toEqual(["run.2.x"]);
    const next = c.read(1 << 16);
    expect(await settled(next)).toBe(false);
    log.append("run", loggedBlocks([e(3)]));
    expect(await next).toEqual({ events: { text: e(3), ends: [e(3).length] } });
    const last = c.read(1 << 16);
    expect(await settled(last)).toBe(false);
    log.end("run", "finished");
    expect(await last).toEqual({ end: "finished" });
    // The end again, to a read after it.
    expect(await c.read(1)).toEqual({ end: "finished" });
  });

  it("close() answers a waiting read with cancelled, and the cursor no longer counts as a reader", async () => {
    const log = new MemoryLog(CAPS, () => 0);
    await log.begin("run", START);
    const a = await log.open("run", 0);
    const b = await log.open("run", 0);
    expect(await log.readers("run")).toBe(2);
    const waiting = a.read(100);
    expect(await settled(waiting)).toBe(false);
    // One read at a time.
    await expect(a.read(100)).rejects.toThrow(/one page at a time/);
    a.close();
    expect(await waiting).toEqual({ end: "cancelled" });
    expect(await a.read(100)).toEqual({ end: "cancelled" });
    a.close();
    expect(await log.readers("run")).toBe(1);
    b.close();
    expect(await log.readers("run")).toBe(0);
  });

  it("keeps nothing of the caller's ends: a part's array changed after it was logged changes nothing", async () => {
    const log = new MemoryLog(CAPS, () => 0);
    await log.begin("run", START);
    const blocks = [block(1, "naïve"), block(2, "plain")];
    const part = loggedBlocks(blocks);
    log.append("run", part);
    (part.ends as number[]).fill(3);
    const c = await log.open("run", 0);
    const page = await c.read(1 << 16);
    expect(page.events && blocksOf(page.events)).toEqual(blocks);
  });

  it("a cursor of a run the log does not hold gets evicted at once, and counts as no reader", async () => {
    const log = new MemoryLog(CAPS, () => 0);
    const c = await log.open("nothing", 0);
    expect(await c.read(100)).toEqual({ end: "evicted" });
    expect(await log.readers("nothing")).toBe(0);
  });

  it("pages a 50 MB run in 64 KiB pages: no page past max(64 KiB, its one event), every event in order, the bytes exact", async () => {
    const PAGE = 64 * 1024;
    const log = new MemoryLog({ retentionMs: 1000, maxRunBytes: 64 * 1024 * 1024, maxTotalBytes: 64 * 1024 * 1024 }, () => 0);
    await log.begin("run", START);
    // Events of many sizes in many characters, three of them past a page; parts of up to 16 events.
    const words = ["naïve café ", "☕ 🛰 ", "日本語のテキスト ", "plain ascii text ", '"q" \\ '];
    const all: string[] = [];
    let bytes = 0;
    let largest = 0;
    let part: string[] = [];
    let parts = 0;
    for (let n = 1; bytes < 50 * 1024 * 1024; n++) {
      const size = n % 5000 === 0 ? 300_000 : 50 + ((n * 7919) % 8000);
      const word = words[n % words.length] as string;
      const b = block(n, word.repeat(Math.ceil(size / utf8(word))));
      all.push(b);
      part.push(b);
      bytes += utf8(b);
      largest = Math.max(largest, utf8(b));
      if (part.length === 1 + (parts % 16)) {
        log.append("run", loggedBlocks(part));
        part = [];
        parts++;
      }
    }
    log.append("run", loggedBlocks(part));
    expect(largest).toBeGreaterThan(PAGE);
    const c = await log.open("run", 0);
    const got: string[] = [];
    let pages = 0;
    // Read while the run is live (its last parts not sealed yet: read from the strings as logged), then its end.
    for (;;) {
      const page = await c.read(PAGE);
      if (page.end !== undefined) {
        expect(page.end).toBe("finished");
        break;
      }
      pages++;
      const size = utf8(page.events.text);
      const events = blocksOf(page.events);
      expect(size).toBeLessThanOrEqual(events.length === 1 ? Math.max(PAGE, largest) : PAGE);
      got.push(...events);
      if (got.length === all.length) log.end("run", "finished");
    }
    expect(got.length).toBe(all.length);
    expect(got).toEqual(all);
    expect(got.reduce((n, b) => n + utf8(b), 0)).toBe(bytes);
    expect(pages).toBeGreaterThan(bytes / PAGE);
    expect(log.stats().bytes).toBe(bytes + startBytes(START));
  });
});
