import { describe, expect, it } from "vitest";
import { EventBlocks } from "../../src/web/resume/sse-blocks.js";
import { runOf, stamped } from "./resume-server.js";

/**
 * EventBlocks, resumableFetch's reader of whole SSE events (HTML Standard, "Interpreting an event
 * stream"), fed the same streams in every way TCP may split them: what it hands on is the input
 * byte for byte, and the ids and events it reports are those of the blocks whose blank line came.
 */
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Feeds `text` in pieces of `size` bytes: what was handed on (then the rest), the events counted, and the last id after each piece. */
function feed(text: string, size: number): { passed: Uint8Array[]; rest: Uint8Array; events: number; blocks: EventBlocks } {
  const blocks = new EventBlocks();
  const all = bytes(text);
  const passed: Uint8Array[] = [];
  let events = 0;
  for (let i = 0; i < all.length; i += size) {
    const r = blocks.push(all.slice(i, i + size));
    if (r.whole.length > 0) passed.push(r.whole);
    events += r.events;
  }
  return { passed, rest: blocks.rest(), events, blocks };
}
const text = (parts: Uint8Array[]): string => Buffer.concat(parts).toString("utf8");

describe("EventBlocks", () => {
  const ends: [string, string, string][] = [
    ["LF", "\n", "\n"],
    ["CRLF", "\r\n", "\r\n"],
    ["CR", "\r", "\r"],
    ["CRLF fields, LF blank lines", "\r\n", "\n"],
    ["LF fields, CRLF blank lines", "\n", "\r\n"],
    ["CR fields, CRLF blank lines", "\r", "\r\n"],
  ];
  for (const [name, eol, blank] of ends)
    it(`${name}: split anywhere, it hands on the stream unchanged in whole events, counts each event once, and ends on the last id and RUN_FINISHED`, () => {
      const stream = stamped(runOf(3), eol, blank).join("");
      for (const size of [1, 2, 3, 7, 64, stream.length]) {
        const { passed, rest, events, blocks } = feed(stream, size);
        expect(text(passed)).toBe(stream);
        expect(rest).toHaveLength(0);
        expect(events).toBe(runOf(3).length);
        expect(blocks.lastId).toBe(`R.${runOf(3).length}`);
        expect(blocks.ended).toBe(true);
        // Every piece handed on ends where a block did: after a blank line's end (its LF, when that line ended CRLF).
        for (const p of passed) expect(["\n", "\r"]).toContain(String.fromCharCode(p[p.length - 1] ?? 0));
      }
    });

  it("a CR that ends a blank line dispatches at once: the block is handed on before the LF of its CRLF comes, and the LF goes with the next piece", () => {
    const b = new EventBlocks();
    expect(text([b.push(bytes('id: A\r\ndata: {"type":"RUN_STARTED"}\r\n\r')).whole])).toBe('id: A\r\ndata: {"type":"RUN_STARTED"}\r\n\r');
    expect(b.lastId).toBe("A");
    // The LF alone is no blank line of its own: no event, and nothing about the id changes.
    expect(b.push(bytes("\n"))).toMatchObject({ events: 0 });
    expect(b.push(bytes("id: B\r\ndata: {}\r\n")).events).toBe(0);
    expect(b.lastId).toBe("A");
  });

  it("what a block held when its connection went is forgotten: its id never counts", () => {
    const b = new EventBlocks();
    b.push(bytes("id: A\n\nid: B\ndata: x\n"));
    expect(b.lastId).toBe("A");
    b.drop();
    expect(b.push(bytes("id: C\ndata: y\n\n"))).toMatchObject({ events: 1 });
    expect(b.lastId).toBe("C");
  });

  it("fields as the standard reads them: a comment is nothing, an id alone dispatches no event but sets the id, an empty id clears it, an id with NULL is ignored, `data` alone is an event", () => {
    const b = new EventBlocks();
    expect(b.push(bytes(": ping\n\n")).events).toBe(0);
    expect(b.push(bytes("id: OPEN\n\n")).events).toBe(0);
    expect(b.lastId).toBe("OPEN");
    expect(b.push(bytes("id: a\0b\n\n")).events).toBe(0);
    expect(b.lastId).toBe("OPEN");
    expect(b.push(bytes("id\n\n")).events).toBe(0);
    expect(b.lastId).toBeUndefined();
    expect(b.push(bytes("id:X\ndata\n\n")).events).toBe(1);
    expect(b.lastId).toBe("X");
    // A block with no id field keeps the last id.
    expect(b.push(bytes("data: {}\n\n")).events).toBe(1);
    expect(b.lastId).toBe("X");
  });

  it("the run ends only on an event whose own type is RUN_FINISHED or RUN_ERROR, not on one that carries such an object", () => {
    const b = new EventBlocks();
    b.push(bytes('data: {"type":"RUN_ERROR","message":"boom"}\n\n'));
    expect(b.ended).toBe(true);
    b.push(bytes('data: {"type":"CUSTOM","value":{"type":"RUN_FINISHED"}}\n\n'));
    expect(b.ended).toBe(false);
    b.push(bytes('data: {"type":\ndata: "RUN_FINISHED"}\n\n'));
    expect(b.ended).toBe(true);
  });

  it("a last block with no blank line after it is held, and handed back by rest()", () => {
    const { passed, rest } = feed('id: A\ndata: {"type":"RUN_STARTED"}\n\ndata: {"type":"RUN_FINISHED"}', 5);
    expect(text(passed)).toBe('id: A\ndata: {"type":"RUN_STARTED"}\n\n');
    expect(text([rest])).toBe('data: {"type":"RUN_FINISHED"}');
  });
});
