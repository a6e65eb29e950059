import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Stamper } from "../../src/resume/stamp.js";

/**
 * The Stamper's text and events, whatever the blocks and however the stream is cut into parts,
 * against the rule written plainly (protocol/README.md §16; HTML Standard, "Interpreting an event
 * stream": a field is "name" or "name:value" at a line's start): every block loses the id lines it
 * had; one with a data field gets `id: <id>` as its first line; one that was only id lines goes.
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
    const kept = lines.filter((l) => !isId(l));
    if (!hasData) {
      if (kept.length > 0) text += `${kept.join("\n")}\n\n`;
      continue;
    }
    const id = mint();
    ids.push(id);
    text += `id: ${id}\n${kept.join("\n")}\n\n`;
  }
  return { text: text + rest, ids, upstreamIds };
}

const LINES = ["data: {}", 'data: {"type":"RUN_STARTED"}', "data", "data:", "datum: x", "id: up-1", "id", "id:", "idx: 3", "identity", ": comment", "event: x", "retry: 5", ""];

describe("Stamper", () => {
  it("stamps exactly the blocks with data, drops the upstream's ids, and hands over each event's block, whatever the parts", () => {
    const stream = fc.array(fc.array(fc.constantFrom(...LINES), { minLength: 1, maxLength: 4 }), { maxLength: 8 }).map((bs) => bs.map((b) => b.join("\n").replace(/^\n+|\n+$/g, "")).filter((b) => b !== "" && !b.includes("\n\n")).map((b) => `${b}\n\n`).join(""));
    fc.assert(
      fc.property(stream, fc.array(fc.nat(), { maxLength: 6 }), (text, cutsAt) => {
        let n = 0;
        const s = new Stamper({ next: () => `id: i${++n}\n` });
        const cuts = [...new Set(cutsAt.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
        let out = "";
        const ids: string[] = [];
        let at = 0;
        for (const c of [...cuts, text.length]) {
          const part = s.push(text.slice(at, c));
          out += part.text;
          let from = 0;
          for (const end of part.ends) {
            const block = part.events.slice(from, end);
            from = end;
            expect(block).toMatch(/^id: i\d+\n/);
            expect(block.endsWith("\n\n") && block.indexOf("\n\n") === block.length - 2).toBe(true);
            ids.push(block.slice(4, block.indexOf("\n")));
            expect(part.text).toContain(block);
          }
          expect(from).toBe(part.events.length);
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
