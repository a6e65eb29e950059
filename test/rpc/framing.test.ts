import { describe, expect, it } from "vitest";
import type { Frame } from "../../src/rpc/common/frame.js";
import { detectFraming, LspDecoder, NdjsonDecoder, type FrameDecoder } from "../../src/rpc/node/framing.js";

/** Feeds bytes in chunks of the given size and collects the frames. */
function decode(decoder: FrameDecoder, bytes: Buffer, chunk = bytes.length): Frame[] {
  const out: Frame[] = [];
  for (let i = 0; i < bytes.length; i += chunk) decoder.push(bytes.subarray(i, i + chunk), (f) => out.push(f));
  return out;
}

const texts = (frames: Frame[]) => frames.map((f) => (f.kind === "text" ? f.text : f.kind));
const lsp = (body: string) => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

describe("NdjsonDecoder", () => {
  it("splits lines, tolerates \\r\\n, ignores blank lines, at every chunk size", () => {
    const input = Buffer.from('{"a":1}\r\n\n  \n{"b":"é"}\n[1]\n');
    for (const chunk of [1, 2, 3, 7, 100]) {
      expect(texts(decode(new NdjsonDecoder(1000), input, chunk)), `chunk ${chunk}`).toEqual(['{"a":1}', '{"b":"é"}', "[1]"]);
    }
  });
  it("discards a line over the limit as it streams, keeps its head, and goes on", () => {
    const big = `{"jsonrpc":"2.0","id":7,"x":"${"y".repeat(5000)}"}`;
    const frames = decode(new NdjsonDecoder(100), Buffer.from(`${big}\n{"ok":1}\n`), 64);
    expect(frames[0]).toMatchObject({ kind: "oversized", bytes: big.length });
    expect((frames[0] as { head: string }).head.startsWith('{"jsonrpc":"2.0","id":7')).toBe(true);
    expect(texts(frames.slice(1))).toEqual(['{"ok":1}']);
  });
  it("reports invalid UTF-8 instead of replacing it", () => {
    expect(texts(decode(new NdjsonDecoder(100), Buffer.from([0x22, 0xff, 0x22, 0x0a])))).toEqual(["bad-utf8"]);
  });
  it("keeps a partial line pending until it ends", () => {
    const d = new NdjsonDecoder(100);
    expect(decode(d, Buffer.from('{"a"'))).toEqual([]);
    expect(d.pending).toBe(true);
  });
});

describe("LspDecoder", () => {
  it("reads Content-Length frames back to back, at every chunk size, with multi-byte text", () => {
    const input = Buffer.from(lsp('{"a":"é"}') + lsp("[1,2]") + "Content-Type: application/json\r\n" + lsp("{}"));
    for (const chunk of [1, 5, 13, 1000]) {
      expect(texts(decode(new LspDecoder(1000), input, chunk)), `chunk ${chunk}`).toEqual(['{"a":"é"}', "[1,2]", "{}"]);
    }
  });
  it("reports a header block without Content-Length, or with a bad one, and resynchronizes at the next frame", () => {
    const input = Buffer.from("X-Nothing: 1\r\n\r\n" + '{"lost":true}' + lsp('{"a":1}') + "Content-Length: abc\r\n\r\n{}" + lsp('{"b":2}'));
    for (const chunk of [1, 4, 1000]) {
      expect(texts(decode(new LspDecoder(1000), input, chunk)), `chunk ${chunk}`).toEqual(["bad-header", '{"a":1}', "bad-header", '{"b":2}']);
    }
  });
  it("loses no frame after a Content-Length that was too short: the leftover is reported and the next header read", () => {
    const a = '{"id":1}';
    const input = Buffer.from(`Content-Length: 4\r\n\r\n${a}` + lsp('{"id":2}') + lsp('{"id":3}'));
    for (const chunk of [1, 3, 1000]) {
      expect(texts(decode(new LspDecoder(1000), input, chunk)), `chunk ${chunk}`).toEqual(['{"id', "bad-header", '{"id":2}', '{"id":3}']);
    }
  });

  it("discards a body over the limit as it streams and reads the next frame", () => {
    const big = `{"id":3,"x":"${"z".repeat(3000)}"}`;
    const frames = decode(new LspDecoder(100), Buffer.from(lsp(big) + lsp('{"ok":1}')), 50);
    expect(frames[0]).toMatchObject({ kind: "oversized", bytes: big.length });
    expect(texts(frames.slice(1))).toEqual(['{"ok":1}']);
  });
  it("gives up on a header block that never ends, without buffering forever", () => {
    const frames = decode(new LspDecoder(100), Buffer.from("x".repeat(20_000) + lsp('{"ok":1}')), 1000);
    expect(texts(frames)).toEqual(["bad-header", '{"ok":1}']);
  });
});

describe("detectFraming", () => {
  it("chooses ndjson for { or [ and lsp otherwise, after whitespace", () => {
    expect(detectFraming(Buffer.from(" \r\n{"))).toBe("ndjson");
    expect(detectFraming(Buffer.from("["))).toBe("ndjson");
    expect(detectFraming(Buffer.from("Content-Length: 2"))).toBe("lsp");
    expect(detectFraming(Buffer.from("\n\n"))).toBeUndefined();
  });
});
