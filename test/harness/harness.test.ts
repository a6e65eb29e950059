import { describe, expect, it } from "vitest";
import { FrameParser, lsp, ndjson } from "../../scripts/harness/frames.js";
import { startPeer } from "../../scripts/harness/peer.js";

/**
 * The harness is the oracle of every process test: its frame parser must
 * refuse anything that is not a whole frame, at once, and its peer must match
 * every response to its request.
 */

const bytes = (s: string): Buffer => Buffer.from(s, "latin1");

describe("FrameParser", () => {
  it("puts NDJSON lines back together across chunks, byte by byte", () => {
    const p = new FrameParser("ndjson");
    const frames = [...bytes(ndjson({ a: 1 }, [2, 3]))].flatMap((b) => p.push(Buffer.from([b])));
    expect(frames).toEqual([{ a: 1 }, [2, 3]]);
    expect(p.pending).toBe(0);
  });

  it("puts LSP frames back together across chunks, byte by byte, header included", () => {
    const p = new FrameParser("lsp");
    const frames = [...lsp({ a: 1 }, "[2]")].flatMap((b) => p.push(Buffer.from([b])));
    expect(frames).toEqual([{ a: 1 }, [2]]);
  });

  it.each([
    ["a blank line", "ndjson", "{}\n\n"],
    ["a \\r before the newline", "ndjson", "{}\r\n"],
    ["a line that is not JSON", "ndjson", "{\n"],
    ["a header of another name", "lsp", "Content-Type: x\r\n\r\n"],
    ["a length of 17 digits", "lsp", "Content-Length: 12345678901234567\r\n\r\n"],
    ["a header with only \\n", "lsp", "Content-Length: 2\n\n{}"],
  ] as const)("refuses %s as soon as the bytes rule out a frame", (_, framing, text) => {
    expect(() => new FrameParser(framing).push(bytes(text))).toThrow();
  });

  it("holds a partial header back, and says at the end that stdout stopped inside a frame", () => {
    const p = new FrameParser("lsp");
    expect(p.push(bytes("Content-Len"))).toEqual([]);
    expect(p.pending).toBe(11);
    expect(() => p.end()).toThrow(/ends inside a frame/);
  });

  it("refuses invalid UTF-8 in a body", () => {
    expect(() => new FrameParser("ndjson").push(Buffer.from([0x22, 0xff, 0x22, 0x0a]))).toThrow(/UTF-8/);
  });
});

describe("Peer, against dist/agui-state", () => {
  it.each(["ndjson", "lsp"] as const)("matches calls, batches and notifications to their answers (%s)", async (framing) => {
    const s = startPeer({ framing });
    await s.notify("openRun", { threadId: "t", state: { n: 0 } });
    const [a, b] = await s.batch([
      ["getState", { threadId: "t" }],
      ["escapePointer", { path: ["a/b"] }],
    ]);
    expect(a).toMatchObject({ result: { version: 1, state: { n: 0 } } });
    expect(b).toMatchObject({ result: { pointer: "/a~1b" } });
    expect(await s.ok("stats")).toMatchObject({ threads: 1, requests: 3 });
    expect(await s.fails("getState", { threadId: "nobody" })).toMatchObject({ code: -32001 });
    s.end();
    expect(await s.waitForExit()).toEqual({ code: 0, signal: null });
    expect([s.unmatched, s.orphans, s.stdoutError, s.stdoutPending]).toEqual([[], [], undefined, 0]);
    expect(s.frames.filter(Array.isArray)).toHaveLength(1);
  });
});
