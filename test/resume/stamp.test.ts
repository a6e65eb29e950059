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

/** A piece of the stream cut after every blank line and at `cuts`, as the fixer's items come (one block each, or less). */
function items(piece: string, cuts: number[]): string[] {
  const at = new Set(cuts.map((c) => c % (piece.length + 1)));
  for (let i = piece.indexOf("\n\n"); i !== -1; i = piece.indexOf("\n\n", i + 2)) at.add(i + 2);
  const out: string[] = [];
  let from = 0;
  for (const c of [...at].sort((a, b) => a - b)) {
    if (c > from) out.push(piece.slice(from, c));
    from = Math.max(from, c);
  }
  if (from < piece.length) out.push(piece.slice(from));
  return out;
}

describe("Stamper", () => {
  it("stamps exactly the blocks with data, drops the upstream's ids, and hands over each event's block, whatever the parts, read whole (push) or as items (pushEach)", () => {
    const stream = fc.array(fc.array(fc.constantFrom(...LINES), { minLength: 1, maxLength: 4 }), { maxLength: 8 }).map((bs) => bs.map((b) => b.join("\n").replace(/^\n+|\n+$/g, "")).filter((b) => b !== "" && !b.includes("\n\n")).map((b) => `${b}\n\n`).join(""));
    fc.assert(
      // pushEach takes the fixer's items: here each part is cut again at every block's end, and at random.
      fc.property(stream, fc.array(fc.nat(), { maxLength: 6 }), fc.boolean(), fc.array(fc.nat(), { maxLength: 4 }), (text, cutsAt, asItems, itemCuts) => {
        let n = 0;
        const s = new Stamper({ next: () => `id: i${++n}\n` });
        const cuts = [...new Set(cutsAt.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
        let out = "";
        const ids: string[] = [];
        let at = 0;
        for (const c of [...cuts, text.length]) {
          const piece = text.slice(at, c);
          const part = asItems ? s.pushEach(items(piece, itemCuts)) : s.push(piece);
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
