import { describe, expect, it } from "vitest";
import type { Frame } from "../../src/rpc/common/frame.js";
import { AutoDecoder, decoderFor, LspDecoder, NdjsonDecoder, type FrameDecoder } from "../../src/rpc/node/framing.js";

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

describe("a message in either framing is never left waiting (protocol/README.md §2; issue 32)", () => {
  const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
  const req = (id: number) => `{"jsonrpc":"2.0","id":${id},"method":"stats"}`;
  const line = (id: number) => req(id) + "\n";

  /** What a decoder makes of the input: each frame (text, or kind and what it names) with the framing its reply takes. */
  function read(decoder: FrameDecoder, chunks: Buffer[]): string[] {
    const out: string[] = [];
    for (const c of chunks) {
      decoder.push(c, (f) => {
        const what = f.kind === "text" ? f.text : f.kind === "stray-line" ? `stray ${JSON.stringify(f.head)}` : f.kind === "bad-header" ? `bad-header (${f.detail})` : f.kind;
        out.push(`${decoder.framing ?? "-"}: ${what}`);
      });
    }
    // Everything was answered: nothing is held, waiting for more input.
    expect(decoder.pending, "a message left waiting").toBe(false);
    return out;
  }

  /** The input whole, byte by byte, and split in two at every position: the same frames every time. */
  function splitEverywhere(framing: "auto" | "ndjson" | "lsp", input: Buffer | string, expected: string[]): void {
    const bytes = Buffer.isBuffer(input) ? input : Buffer.from(input);
    expect(read(decoderFor(framing, 1000), [bytes])).toEqual(expected);
    expect(read(decoderFor(framing, 1000), [...bytes].map((b) => Buffer.from([b]))), "byte by byte").toEqual(expected);
    for (let at = 0; at <= bytes.length; at++) {
      expect(read(decoderFor(framing, 1000), [bytes.subarray(0, at), bytes.subarray(at)]), `split at ${at}`).toEqual(expected);
    }
  }

  describe("auto", () => {
    it("skips a leading UTF-8 BOM before NDJSON", () => splitEverywhere("auto", Buffer.concat([BOM, Buffer.from(line(1))]), [`ndjson: ${req(1)}`]));
    it("skips a leading UTF-8 BOM before an LSP frame", () => splitEverywhere("auto", Buffer.concat([BOM, Buffer.from(lsp(req(1)))]), [`lsp: ${req(1)}`]));
    it("answers a first line that is neither JSON nor a header, then reads NDJSON", () => splitEverywhere("auto", "hello\n" + line(1), ['-: stray "hello"', `ndjson: ${req(1)}`]));
    it("answers such a line at any point, in the framing of the messages before it", () => {
      splitEverywhere("auto", line(1) + "hello\r\n" + line(2), [`ndjson: ${req(1)}`, 'ndjson: stray "hello"', `ndjson: ${req(2)}`]);
      splitEverywhere("auto", lsp(req(1)) + "hello\r\n" + lsp(req(2)), [`lsp: ${req(1)}`, 'lsp: stray "hello"', `lsp: ${req(2)}`]);
    });
    it("reads an LSP frame after JSON lines; after an LSP frame, a JSON line is a stray line: neither waits on the other", () => {
      splitEverywhere("auto", line(1) + lsp(req(2)) + line(3) + lsp(req(4)), [`ndjson: ${req(1)}`, `lsp: ${req(2)}`, `lsp: stray ${JSON.stringify(req(3))}`, `lsp: ${req(4)}`]);
    });
    it("after an LSP frame, skips a broken block's body to the next Content-Length, as --framing lsp does", () => {
      const body = '{"a":1}';
      splitEverywhere("auto", lsp(req(1)) + `Content-Length: \r\n\r\n${body}Content-Type: x\r\n` + lsp(req(2)), [`lsp: ${req(1)}`, 'lsp: bad-header (bad Content-Length "")', `lsp: ${req(2)}`]);
    });
    it("ends a header block at a line that is not a header, and reads that line", () => {
      splitEverywhere("auto", "hello: world\n" + line(1), ["-: bad-header (a line that is not a header cut the header block off)", `ndjson: ${req(1)}`]);
      splitEverywhere("auto", "Content-Type: x\r\nhello\n" + line(1), ["-: bad-header (a line that is not a header cut the header block off)", '-: stray "hello"', `ndjson: ${req(1)}`]);
    });
    it("reads on after a header block without Content-Length: a JSON line is not lost, nor the next LSP frame", () => {
      splitEverywhere("auto", "x: y\n\n" + line(1), ["-: bad-header (missing Content-Length)", `ndjson: ${req(1)}`]);
      splitEverywhere("auto", 'X-Nothing: 1\r\n\r\n{"lost":true}' + lsp(req(1)), ["-: bad-header (missing Content-Length)", `lsp: ${req(1)}`]);
    });
    it("reads what is left of a body whose Content-Length was too short as LSP, even when it starts with {", () => {
      const body = '[{"a":1},{"b":2}]';
      splitEverywhere("auto", `Content-Length: 9\r\n\r\n${body}` + lsp(req(2)), ['lsp: [{"a":1},', "lsp: bad-header (bytes before Content-Length)", `lsp: ${req(2)}`]);
    });
    it("keeps an NDJSON conversation in NDJSON through random junk lines, and answers what follows", () => {
      let a = 7;
      const junk = Buffer.alloc(6000);
      for (let i = 0; i < junk.length; i++) {
        a = (a * 1103515245 + 12345) >>> 0;
        junk[i] = a >>> 24;
      }
      const frames = read(decoderFor("auto", 1000), [Buffer.from(line(1)), junk, Buffer.from("\n" + line(2) + line(3))]);
      expect(frames[0]).toBe(`ndjson: ${req(1)}`);
      expect(frames.slice(-2)).toEqual([`ndjson: ${req(2)}`, `ndjson: ${req(3)}`]);
      expect(frames.filter((f) => f.startsWith("lsp:"))).toEqual([]);
    });
    it("takes LF alone as the end of a header line", () => splitEverywhere("auto", `Content-Length: ${req(1).length}\n\n${req(1)}` + lsp(req(2)), [`lsp: ${req(1)}`, `lsp: ${req(2)}`]));
    it("answers a BOM that is not at the start (a second file run together) as a stray line", () => {
      splitEverywhere("auto", Buffer.concat([Buffer.from(line(1)), BOM, Buffer.from(line(2))]), [`ndjson: ${req(1)}`, `ndjson: stray ${JSON.stringify("\ufeff" + req(2))}`]);
    });
  });

  describe("--framing ndjson", () => {
    it("skips a leading BOM", () => splitEverywhere("ndjson", Buffer.concat([BOM, Buffer.from(line(1))]), [`ndjson: ${req(1)}`]));
    it("hands a line that is not JSON on as a message (the dispatcher answers -32700) and reads the next", () => splitEverywhere("ndjson", "hello\n" + line(1), ["ndjson: hello", `ndjson: ${req(1)}`]));
  });

  describe("--framing lsp", () => {
    it("skips a leading BOM", () => splitEverywhere("lsp", Buffer.concat([BOM, Buffer.from(lsp(req(1)))]), [`lsp: ${req(1)}`]));
    it("answers a line that is not a header, JSON included, and reads the next frame", () => {
      splitEverywhere("lsp", "hello\r\n" + lsp(req(1)) + line(2) + lsp(req(3)), ['lsp: stray "hello"', `lsp: ${req(1)}`, `lsp: stray ${JSON.stringify(req(2))}`, `lsp: ${req(3)}`]);
    });
  });

  it("a BOM's first bytes that turn out not to be one are given back", () => {
    expect(read(decoderFor("ndjson", 1000), [Buffer.from([0xef]), Buffer.from([0xbb]), Buffer.from("x\n")])).toEqual(["ndjson: bad-utf8"]);
  });

  it("AutoDecoder on its own reads NDJSON without the BOM step", () => {
    expect(read(new AutoDecoder(1000), [Buffer.from(line(1))])).toEqual([`ndjson: ${req(1)}`]);
  });
});
