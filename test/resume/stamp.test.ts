import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Stamper } from "../../src/resume/stamp.js";

/**
 * The Stamper's text and events, whatever the blocks and however the stream is cut into parts,
 * against the rule written plainly (protocol/README.md §16; HTML Standard, "Interpreting an event
 * stream": a field is "name" or "name:value" at a line's start): each block with a data field gets
 * `id: <id>` as its first line and loses the id lines it had; a block without data passes as it is.
 */
function byTheRule(stream: string, mint: () => string): { text: string; ids: string[]; upstreamIds: number } {
  const blocks = stream.split("\n\n");
  const rest = blocks.pop() as string;
  let text = "";
  const ids: string[] = [];
  let upstreamIds = 0;
  for (const block of blocks) {
    const lines = block.split("\n");
    const isId = (l: string) => l === "id" || l.startsWith("id:");
    const hasData = lines.some((l) => l === "data" || l.startsWith("data:"));
    upstreamIds += lines.filter(isId).length;
    if (!hasData) {
      text += `${block}\n\n`;
      continue;
    }
    const id = mint();
    ids.push(id);
    text += `id: ${id}\n${lines.filter((l) => !isId(l)).join("\n")}\n\n`;
  }
  return { text: text + rest, ids, upstreamIds };
}

const LINES = ["data: {}", 'data: {"type":"RUN_STARTED"}', "data", "data:", "datum: x", "id: up-1", "id", "id:", "idx: 3", "identity", ": comment", "event: x", "retry: 5", ""];

describe("Stamper", () => {
  it("stamps exactly the blocks with data, drops the upstream's ids, whatever the parts", () => {
    const stream = fc.array(fc.array(fc.constantFrom(...LINES), { minLength: 1, maxLength: 4 }), { maxLength: 8 }).map((bs) => bs.map((b) => b.join("\n").replace(/^\n+|\n+$/g, "")).filter((b) => b !== "" && !b.includes("\n\n")).map((b) => `${b}\n\n`).join(""));
    fc.assert(
      fc.property(stream, fc.array(fc.nat(), { maxLength: 6 }), (text, cutsAt) => {
        let n = 0;
        const s = new Stamper(() => `i${++n}`);
        const cuts = [...new Set(cutsAt.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
        let out = "";
        const ids: string[] = [];
        let at = 0;
        for (const c of [...cuts, text.length]) {
          const part = s.push(text.slice(at, c));
          out += part.text;
          for (const e of part.events) {
            ids.push(e.id);
            expect(e.block.startsWith(`id: ${e.id}\n`)).toBe(true);
            expect(out).toContain(e.block);
          }
          at = c;
        }
        out += s.end().text;
        let m = 0;
        const want = byTheRule(text, () => `i${++m}`);
        expect(out).toBe(want.text);
        expect(ids).toEqual(want.ids);
        expect(s.upstreamIds).toBe(want.upstreamIds);
      }),
      { numRuns: 2000 },
    );
  });
});
