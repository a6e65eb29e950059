import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Follower, RunEnd } from "../../src/resume/log.js";
import { MemoryLog } from "../../src/resume/memory-log.js";
import { idOfBlock } from "../../src/resume/logged.js";
import { blocksOf, loggedBlocks } from "./logged-blocks.js";

/**
 * The memory store keeps a run's events packed (memory-log.ts): whatever the parts they came in and
 * whatever characters they hold, a rejoin from any event gets exactly the events after it, each with
 * its id, cut where each ends, and an id is found at its number.
 */
const START = { threadId: "t", path: "/agent", credential: "c", status: 200, headers: {}, prelude: [], opening: "run.0.open" };

function collect(): Follower & { got: string[]; ended: RunEnd[] } {
  const got: string[] = [];
  const ended: RunEnd[] = [];
  return { got, ended, events: (e) => void got.push(...blocksOf(e)), end: (r) => void ended.push(r) };
}

const texts = fc.constantFrom("", "hello", "naïve café", "☕ 🛰 emoji", "日本語のテキスト", "x".repeat(5000), '"quoted" \\ back');

describe("MemoryLog", () => {
  it("a rejoin from any event gets exactly the events after it, across seals, in any characters", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(texts, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 12 }), fc.boolean(), fc.boolean(), async (parts, ended, sealEach) => {
        const log = new MemoryLog({ retentionMs: 1000, maxRunBytes: 1e9, maxTotalBytes: 1e10 }, () => 0);
        await log.begin("run", START);
        const all: string[] = [];
        for (const part of parts) {
          const blocks = part.map((t) => {
            const block = `id: run.${all.length + 1}.n${all.length}\ndata: ${JSON.stringify({ type: "TEXT_MESSAGE_CONTENT", delta: t })}\n\n`;
            all.push(block);
            return block;
          });
          log.append("run", loggedBlocks(blocks));
          // A read seals what is open: the runs read below span many segments.
          if (sealEach) expect(await log.idAt("run", all.length)).toBe(`run.${all.length}.n${all.length - 1}`);
        }
        if (ended) log.end("run", "finished");
        for (let after = 0; after <= all.length; after++) {
          const f = collect();
          const unfollow = await log.follow("run", after, f);
          expect(f.got).toEqual(all.slice(after));
          expect(f.ended).toEqual(ended ? ["finished"] : []);
          unfollow();
        }
        for (let seq = 1; seq <= all.length; seq++) expect(await log.idAt("run", seq)).toBe(`run.${seq}.n${seq - 1}`);
        expect(await log.idAt("run", all.length + 1)).toBeUndefined();
        expect(await log.idAt("run", 0)).toBe(START.opening);
        expect(log.stats().bytes).toBe(all.reduce((n, b) => n + Buffer.byteLength(b), 0));
        expect((await log.find("run"))?.events).toBe(all.length);
      }),
      { numRuns: 200 },
    );
  });

  it("a follower of a live run gets the events it missed, then each new part, then the end", async () => {
    const log = new MemoryLog({ retentionMs: 1000, maxRunBytes: 1e9, maxTotalBytes: 1e10 }, () => 0);
    await log.begin("run", START);
    const e = (n: number): string => `id: run.${n}.x\ndata: {"n":${n}}\n\n`;
    log.append("run", loggedBlocks([e(1), e(2)]));
    const f = collect();
    await log.follow("run", 1, f);
    log.append("run", loggedBlocks([e(3)]));
    log.end("run", "finished");
    expect(f.got).toEqual([e(2), e(3)]);
    expect(f.got.map(idOfBlock)).toEqual(["run.2.x", "run.3.x"]);
    expect(f.ended).toEqual(["finished"]);
  });
});
