import { describe, expect, it } from "vitest";
import { encode, type Framing } from "../../scripts/harness/frames.js";
import { MB } from "../../scripts/harness/os.js";
import { startPeer } from "../../scripts/harness/peer.js";
import { crossing, expectLimit, limitData, openSentinel, type Json } from "./crossing.js";

/** --max-message-bytes and --max-ops at and past their edges (protocol/README.md §7; see test/hardening/crossing.ts). */

const FRAMINGS: readonly Framing[] = ["ndjson", "lsp"];

describe("--max-message-bytes", { timeout: 20_000 }, () => {
  describe.each(FRAMINGS)("%s, --max-message-bytes 4KiB", (framing) => {
    const MAX = 4096;
    /**
     * An openRun of exactly `bytes` bytes (the body; an NDJSON line without its
     * "\n"), padded with 2-byte UTF-8 characters so bytes and characters differ.
     */
    const sized = (id: number, threadId: string, bytes: number): string => {
      const shell = (pad: string): string => JSON.stringify({ jsonrpc: "2.0", id, method: "openRun", params: { threadId, state: { pad } } });
      const room = bytes - Buffer.byteLength(shell(""));
      const text = shell("é".repeat(Math.floor(room / 2)) + "x".repeat(room % 2));
      expect(Buffer.byteLength(text)).toBe(bytes);
      expect(text.length).toBeLessThan(bytes);
      return text;
    };

    it("serves a message of exactly max bytes and refuses max+1 with -32003 under its id; nothing else changes", async () => {
      const s = startPeer({ framing, args: ["--max-message-bytes", "4KiB"] });
      await openSentinel(s);
      const atMax = sized(101, "at-max", MAX);
      const r1 = await crossing(s, () => s.callRaw(101, encode(framing, atMax)));
      expect(r1).toEqual({ jsonrpc: "2.0", id: 101, result: { threadId: "at-max", version: 1, delta: [], events: [] } });
      expect(await s.ok("getState", { threadId: "at-max" })).toEqual({ version: 1, state: (JSON.parse(atMax) as { params: { state: unknown } }).params.state });

      const past = sized(102, "past-max", MAX + 1);
      const r2 = await crossing(s, () => s.callRaw(102, encode(framing, past)));
      expect("error" in r2 && r2.error).toMatchObject({ code: -32003, data: limitData("maxMessageBytes", MAX, MAX + 1) });
      // Refused before it was read: the thread it names was never created.
      expect((await s.fails("getState", { threadId: "past-max" })).data).toEqual({ code: "UNKNOWN_THREAD", threadId: "past-max", reason: "never opened" });
      // The stream is still in step: the next message is answered normally.
      expect(await s.ok("escapePointer", { path: ["after"] })).toEqual({ pointer: "/after" });
      expect(s.orphans).toEqual([]);
      expect(s.stdoutError).toBeUndefined();
    });
  });

  it("at the default 64 MiB: a message of exactly 64 MiB is read (and its state refused by maxStateBytes), 64 MiB + 1 is refused unread", async () => {
    const s = startPeer();
    await openSentinel(s);
    const MAX = 64 * MB;
    const big = (id: number, bytes: number): Buffer => {
      const head = Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":"openRun","params":{"threadId":"big","state":{"s":"`);
      const tail = Buffer.from('"}}}\n');
      return Buffer.concat([head, Buffer.alloc(bytes - head.length - tail.length + 1, 0x78), tail]);
    };
    const r1 = await crossing(s, () => s.callRaw(1001, big(1001, MAX), 60_000));
    // Read and parsed whole: what stops it is the next limit, the state's size.
    expect("error" in r1 && r1.error).toMatchObject({ code: -32003, data: { limit: "maxStateBytes", max: 32 * MB } });
    const r2 = await crossing(s, () => s.callRaw(1002, big(1002, MAX + 1), 60_000));
    expect("error" in r2 && r2.error).toMatchObject({ code: -32003, data: limitData("maxMessageBytes", MAX, MAX + 1) });
    expect((await s.fails("getState", { threadId: "big" })).data).toMatchObject({ reason: "never opened" });
  });

  // What discarding costs in memory (nothing like the message's size) is a figure for `npm run bench` (H3).
  it.each(FRAMINGS)("refuses a 500 MB %s message as it streams in, having counted every byte of it, and answers the next request", async (framing) => {
    const s = startPeer({ framing });
    await openSentinel(s);
    const before = await s.ok("getState", { threadId: "sentinel" });
    const TOTAL = 500 * MB;
    const head = Buffer.from('{"jsonrpc":"2.0","id":7,"method":"parsePointer","params":{"pointer":"/');
    const tail = Buffer.from('"}}');
    const body = head.length + TOTAL + tail.length;
    const chunk = Buffer.alloc(MB, 0x78);
    await s.write(framing === "lsp" ? Buffer.concat([Buffer.from(`Content-Length: ${body}\r\n\r\n`), head]) : head);
    for (let i = 0; i < TOTAL / MB; i++) await s.write(chunk);
    const r = await s.callRaw(7, framing === "lsp" ? tail : Buffer.concat([tail, Buffer.from("\n")]), 60_000);
    const next = await s.ok("escapePointer", { path: ["after"] });
    expect("error" in r && r.error).toMatchObject({ code: -32003, data: limitData("maxMessageBytes", 64 * MB, body) });
    expect(next).toEqual({ pointer: "/after" });
    expect(await s.ok("getState", { threadId: "sentinel" })).toEqual(before);
  });
});

describe("--max-ops", { timeout: 20_000 }, () => {
  const ops = (n: number): Json[] => Array.from({ length: n }, (_, i) => ({ op: "add", path: `/o${i}`, value: i }));

  it.each([
    ["--max-ops 50", ["--max-ops", "50"], 50],
    ["the default 10,000", [], 10_000],
  ] as const)("applyOps and normalize take exactly max ops and refuse max+1 with -32003 (%s)", async (_, args, MAX) => {
    const s = startPeer({ args });
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", state: {} });

    const atMax = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: ops(MAX) }));
    // openRun with {} on a new thread changed nothing: version 0, then 1.
    expect(atMax).toMatchObject({ version: 1, skipped: [] });
    expect((atMax["delta"] as unknown[]).length).toBe(MAX);

    for (const atomic of [false, true]) {
      const e = await crossing(s, () => s.fails("applyOps", { threadId: "t", ops: ops(MAX + 1), atomic }));
      expectLimit(e, "maxOps", MAX, MAX + 1);
    }
    // Nothing applied by the refused calls.
    expect(await s.ok("getState", { threadId: "t" })).toMatchObject({ version: 1 });

    const norm = await crossing(s, () => s.ok("normalize", { ops: ops(MAX) }));
    expect((norm["delta"] as unknown[]).length).toBe(MAX);
    expectLimit(await crossing(s, () => s.fails("normalize", { ops: ops(MAX + 1) })), "maxOps", MAX, MAX + 1);
  });
});
