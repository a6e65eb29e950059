import { describe, expect, it } from "vitest";
import { CLIENT_SSE_LIMIT, EventReader, rewriteSse, type SseReading, type StreamItem } from "../../src/stream/events.js";
import { parseSSEStream } from "@ag-ui/client";
import { Subject } from "rxjs";
import { Rng } from "../../scripts/soak/rng.js";

/**
 * The reader against the HTML Standard's "Interpreting an event stream"
 * (§9.2.6) for SSE, and one object per line for NDJSON. Every test also
 * checks that the items' raw text is the input, byte for byte.
 */

function read(input: string | Uint8Array, chunks?: number[], reading: SseReading = "spec"): { items: StreamItem[]; reader: EventReader } {
  const reader = new EventReader(reading);
  const bytes = typeof input === "string" ? new TextEncoder().encode(input) : input;
  const cuts = [0, ...(chunks ?? []), bytes.length];
  const items: StreamItem[] = [];
  for (let i = 0; i + 1 < cuts.length; i++) items.push(...reader.push(bytes.subarray(cuts[i], cuts[i + 1])));
  items.push(...reader.end());
  expect(items.map((i) => i.raw).join("")).toBe(new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes));
  return { items, reader };
}

const events = (input: string, chunks?: number[]) => read(input, chunks).items.filter((i) => i.data !== undefined).map((i) => ({ data: i.data, line: i.line }));

describe("the SSE reader", () => {
  it("joins the data lines of an event with LF and dispatches on a blank line", () => {
    expect(events('data: {"a":\ndata: 1}\n\ndata: 2\n\n')).toEqual([
      { data: '{"a":\n1}', line: 1 },
      { data: "2", line: 4 },
    ]);
  });

  it("ignores comments and the id, event and retry fields, and keeps them in the raw text", () => {
    const { items } = read(': keep-alive\nid: 7\nevent: message\nretry: 1000\ndata: {"x":1}\n\n');
    expect(items).toEqual([{ raw: ': keep-alive\nid: 7\nevent: message\nretry: 1000\ndata: {"x":1}\n\n', data: '{"x":1}', line: 1 }]);
  });

  it("removes one space after the colon, no more, and reads a field without a colon as empty", () => {
    expect(events("data:x\n\ndata:  x\n\ndata\ndata\n\n").map((e) => e.data)).toEqual(["x", " x", "\n"]);
  });

  it("dispatches nothing for a block without data, which passes through", () => {
    const { items } = read(": ping\n\nid: 3\n\n\ndata: 1\n\n");
    expect(items.map((i) => [i.raw, i.data])).toEqual([
      [": ping\n\n", undefined],
      ["id: 3\n\n", undefined],
      ["\n", undefined],
      ["data: 1\n\n", "1"],
    ]);
  });

  it("accepts CRLF, CR alone and LF, mixed, as line ends", () => {
    expect(events("data: 1\r\n\r\ndata: 2\r\rdata: 3\n\ndata: 4\r\n\n").map((e) => e.data)).toEqual(["1", "2", "3", "4"]);
    expect(events("data: 1\r\n\r\ndata: 2\r\r").map((e) => e.line)).toEqual([1, 3]);
  });

  it("skips a BOM at the start of the stream and keeps it in the raw text", () => {
    const { items, reader } = read("\uFEFFdata: 1\n\n");
    expect(reader.framing).toBe("sse");
    expect(items).toEqual([{ raw: "\uFEFFdata: 1\n\n", data: "1", line: 1 }]);
  });

  it("reads an event that the end of the input cuts off before its blank line, as @ag-ui/client does", () => {
    expect(events("data: 1\n\ndata: 2\n")).toEqual([
      { data: "1", line: 1 },
      { data: "2", line: 3 },
    ]);
  });

  it("gives the same items however the bytes are split, at every offset and byte by byte", () => {
    const input = ": c\r\ndata: {\"é\":\"😀\"}\r\n\r\nid: 1\rdata: 2\r\rdata: 3\ndata: 4\n\n";
    const bytes = new TextEncoder().encode(input);
    // A CR that ends a blank line dispatches at once, so the LF of a CRLF cut off from it passes
    // through as its own item: the raw text is the same in total (read() checks it), item edges may move.
    const dataOf = (items: StreamItem[]) => items.filter((i) => i.data !== undefined).map((i) => [i.data, i.line]);
    const whole = dataOf(read(bytes).items);
    expect(whole).toEqual([['{"é":"😀"}', 1], ["2", 4], ["3\n4", 7]]);
    for (let cut = 1; cut < bytes.length; cut++) expect(dataOf(read(bytes, [cut]).items)).toEqual(whole);
    const every = Array.from({ length: bytes.length - 1 }, (_, i) => i + 1);
    expect(dataOf(read(bytes, every).items)).toEqual(whole);
  });

  it("completes an event when its blank line arrives, before any more input", () => {
    const reader = new EventReader();
    expect(reader.push("data: 1\n")).toEqual([]);
    expect(reader.push("\n")).toEqual([{ raw: "data: 1\n\n", data: "1", line: 1 }]);
    // A CR ends the line at once; the LF of a CRLF that follows in the next chunk joins it.
    expect(reader.push("data: 2\r\n\r")).toEqual([{ raw: "data: 2\r\n\r", data: "2", line: 3 }]);
    expect(reader.push("\ndata: 3\r\n\r\n")).toEqual([
      { raw: "\n", line: 5 },
      { raw: "data: 3\r\n\r\n", data: "3", line: 5 },
    ]);
  });
});

/**
 * §9.2.6 read literally over the whole input: split into lines at CRLF, LF or
 * CR; a blank line dispatches the data buffer (less its last LF) when it is
 * not empty. One departure, @ag-ui/client's: data left at the end of the
 * input is dispatched too.
 */
function specData(input: string): string[] {
  const out: string[] = [];
  let buffer = "";
  const lines = input.replace(/^\uFEFF/, "").split(/\r\n|\r|\n/);
  lines.forEach((line, n) => {
    if (line === "") {
      if (n < lines.length - 1 && buffer !== "") out.push(buffer.slice(0, -1));
      buffer = n < lines.length - 1 ? "" : buffer;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") buffer += value + "\n";
  });
  if (buffer !== "") out.push(buffer.slice(0, -1));
  return out;
}

describe("the SSE reader against the HTML Standard, on random input", () => {
  it("dispatches exactly the data the spec's algorithm does, however the input is cut", () => {
    const rng = new Rng(6001);
    const pieces = ["data:", "data: ", "data:  ", "data", "dat", "datax: ", "id: 7", "event: e", "retry: 1", ":", ": c", " ", "x", "{}", "é", "\r", "\n", "\r\n", "\n\n", "\r\r"];
    for (let n = 0; n < 500; n++) {
      let input = rng.chance(0.1) ? "\uFEFF" : "";
      // First line an SSE field, so the framing is SSE.
      input += "data: 0\n";
      for (let k = rng.int(40); k > 0; k--) input += rng.pick(pieces);
      const cuts = [...new Set(Array.from({ length: rng.int(4) }, () => 1 + rng.int(input.length)))].sort((a, b) => a - b);
      const bytes = new TextEncoder().encode(input);
      const byteCuts = cuts.map((c) => new TextEncoder().encode(input.slice(0, c)).length).filter((c) => c > 0 && c < bytes.length);
      const got = read(bytes, [...new Set(byteCuts)]).items.filter((i) => i.data !== undefined).map((i) => i.data);
      expect(got, JSON.stringify({ input, cuts: byteCuts })).toEqual(specData(input));
    }
  });
});

/** What @ag-ui/client 1.0.0's own SSE parser emits for these chunks: the JSON values, then its error if it fails. */
function clientParse(chunks: Uint8Array[]): { values: unknown[]; error?: string } {
  const source = new Subject<{ type: "data"; data: Uint8Array }>();
  const out: { values: unknown[]; error?: string } = { values: [] };
  parseSSEStream(source as never).subscribe({ next: (v) => out.values.push(v), error: (e: unknown) => (out.error = String(e)) });
  for (const data of chunks) source.next({ type: "data", data });
  source.complete();
  return out;
}

describe("the bound on an unfinished event (spec reading, as fix reads)", () => {
  const MiB = 1024 * 1024;

  for (const [framing, head, endless] of [
    ["SSE", "data: 1\n\n", (n: number) => "data: " + "x".repeat(n)],
    ["SSE, many data lines in one event", "data: 1\n\n", (n: number) => "data: yy\n".repeat(Math.ceil(n / 9))],
    ["NDJSON", "1\n", (n: number) => "x".repeat(n)],
  ] as const) {
    it(`${framing}: past CLIENT_SSE_LIMIT the held text comes out once, flagged, and the rest as it arrives, holding nothing`, () => {
      const reader = new EventReader();
      const items = [...reader.push(head)];
      const body = endless(CLIENT_SSE_LIMIT + MiB);
      const parts = Array.from({ length: Math.ceil(body.length / MiB) }, (_, i) => body.slice(i * MiB, (i + 1) * MiB));
      const per: StreamItem[][] = parts.map((p) => reader.push(p));
      const after = ["data: 2\n\n", "3\n", "tail"];
      const late = after.map((t) => reader.push(t));
      items.push(...per.flat(), ...late.flat(), ...reader.end());
      expect(items.map((i) => i.raw).join("")).toBe(head + body + after.join(""));
      expect(items.filter((i) => i.data !== undefined).map((i) => i.data)).toEqual(["1"]);
      const over = items.filter((i) => i.overflow);
      expect(over).toHaveLength(1);
      expect(over[0]?.raw.length).toBeGreaterThan(CLIENT_SSE_LIMIT);
      expect(over[0]?.raw.length).toBeLessThanOrEqual(CLIENT_SSE_LIMIT + MiB);
      expect(over[0]?.line).toBe(framing === "NDJSON" ? 2 : 3);
      // After it, each push comes out whole at once, as one item: nothing is held for later.
      const i = per.findIndex((p) => p.some((it) => it.overflow));
      for (const [k, p] of parts.slice(i + 1).entries()) expect(per[i + 1 + k]).toEqual([{ raw: p, line: expect.any(Number) as number }]);
      for (const [k, t] of after.entries()) expect(late[k]?.map((it) => it.raw)).toEqual([t]);
    });
  }

  it("holds up to the limit without a flag: an event just under it is read as an event", () => {
    const data = JSON.stringify({ type: "CUSTOM", name: "x", value: "y".repeat(CLIENT_SSE_LIMIT - 100) });
    const { items } = read(`data: ${data}\n\n`, [65536, 3 * 65536]);
    expect(items.filter((i) => i.overflow)).toEqual([]);
    expect(items.map((i) => i.data)).toEqual([data]);
  });
});

describe("the SSE reader, reading as @ag-ui/client does", () => {
  it("splits only at two LFs, so events framed with CRLF run together", () => {
    const items = read("data: 1\r\n\r\ndata: 2\r\n\r\n", [], "client").items.filter((i) => i.data !== undefined);
    expect(items.map((i) => i.data)).toEqual(["1\r\n2\r"]);
    expect(read(": c\ndata\nid: 1\ndata:x\n\n\ndata:  y\n\n", [], "client").items.filter((i) => i.data !== undefined).map((i) => [i.data, i.line])).toEqual([
      ["x", 1],
      [" y", 6],
    ]);
  });

  it("stops, as the client's parseSSEStream does, once more than 10 MiB is held without two LFs, and holds nothing after", () => {
    const event = `data: ${JSON.stringify({ type: "CUSTOM", name: "x", value: "y".repeat(1000) })}\r\n\r\n`;
    const bytes = new TextEncoder().encode(`data: 1\n\n${event.repeat(Math.ceil(CLIENT_SSE_LIMIT / event.length) + 10)}`);
    const chunks = Array.from({ length: Math.ceil(bytes.length / 65536) }, (_, i) => bytes.subarray(i * 65536, (i + 1) * 65536));
    const theirs = clientParse(chunks);
    expect(theirs.values).toEqual([1]);
    expect(theirs.error).toMatch(/SSE buffer size exceeded/);
    const reader = new EventReader("client");
    const items = chunks.flatMap((c) => reader.push(c));
    items.push(...reader.end());
    expect(items.filter((i) => i.data !== undefined).map((i) => i.data)).toEqual(["1"]);
    const over = items.filter((i) => i.overflow);
    expect(over).toHaveLength(1);
    expect(over[0]?.raw.length).toBeGreaterThan(CLIENT_SSE_LIMIT);
    expect(over[0]?.raw.length).toBeLessThan(CLIENT_SSE_LIMIT + 65536);
    expect(over[0]?.line).toBe(3);
  });

  it("gives the events @ag-ui/client's own parseSSEStream gives, on random input cut at random", () => {
    const rng = new Rng(6002);
    const ends = ["\n\n", "\r\n\r\n", "\r\r", "\n", "\r\n", "\n\r\n"];
    for (let n = 0; n < 400; n++) {
      let input = rng.chance(0.1) ? "\uFEFF" : "";
      for (let k = 1 + rng.int(6); k > 0; k--) {
        if (rng.chance(0.2)) input += rng.pick([": comment", "id: 3", "event: x", "data", "retry: 5"]) + rng.pick(ends);
        input += rng.pick(["data: ", "data:", "data:  "]) + JSON.stringify({ n: rng.int(100), s: rng.pick(["a", "é", "b c"]) }) + rng.pick(ends);
      }
      const bytes = new TextEncoder().encode(input);
      const cuts = [...new Set(Array.from({ length: rng.int(4) }, () => 1 + rng.int(bytes.length - 1)))].sort((a, b) => a - b);
      const chunks = [0, ...cuts, bytes.length].slice(1).map((end, i, all) => bytes.subarray(i === 0 ? 0 : (all[i - 1] as number), end));
      const theirs = clientParse(chunks);
      const ours: { values: unknown[]; error?: string } = { values: [] };
      for (const item of read(bytes, cuts, "client").items) {
        if (item.data === undefined) continue;
        try {
          ours.values.push(JSON.parse(item.data));
        } catch (e) {
          ours.error = String(e);
          break;
        }
      }
      expect({ values: ours.values, failed: ours.error !== undefined }, JSON.stringify(input)).toEqual({ values: theirs.values, failed: theirs.error !== undefined });
    }
  });
});

describe("the NDJSON reader", () => {
  it("reads one event per line, with LF or CRLF, and passes blank lines through", () => {
    const { items, reader } = read('{"a":1}\r\n\n{"b":2}\n   \n{"c":3}');
    expect(reader.framing).toBe("ndjson");
    expect(items.map((i) => [i.data, i.line])).toEqual([
      ['{"a":1}', 1],
      [undefined, 2],
      ['{"b":2}', 3],
      [undefined, 4],
      ['{"c":3}', 5],
    ]);
  });

  it("takes the framing from the first non-blank line: an SSE field or comment, or else NDJSON", () => {
    expect(read("\n\n: hi\n\n").reader.framing).toBe("sse");
    expect(read("retry: 10\n\n").reader.framing).toBe("sse");
    expect(read("\n  null\n").reader.framing).toBe("ndjson");
    expect(read("\uFEFF{}\n").items).toEqual([{ raw: "\uFEFF{}\n", data: "{}", line: 1 }]);
  });

  it("gives the same events however the bytes are split", () => {
    const input = '{"type":"X","s":"ü"}\r\n\n{"type":"Y"}\n';
    const bytes = new TextEncoder().encode(input);
    const whole = read(bytes).items;
    for (let cut = 1; cut < bytes.length; cut++) expect(read(bytes, [cut]).items).toEqual(whole);
  });
});

describe("rewriteSse", () => {
  it("puts new data in the first data line, drops the others, and keeps every other line and its end", () => {
    expect(rewriteSse(": c\r\nid: 1\r\ndata: {\r\ndata: }\r\n\r\n", '{"a":1}')).toBe(': c\r\nid: 1\r\ndata: {"a":1}\r\n\r\n');
  });

  it("keeps an emptied event's id and comment lines, and drops an event that had nothing else", () => {
    expect(rewriteSse("id: 9\ndata: 1\n\n", undefined)).toBe("id: 9\n\n");
    expect(rewriteSse("data: 1\ndata: 2\n\n", undefined)).toBe("");
  });
});
