import { afterEach, describe, expect, it } from "vitest";
import { encode, type Framing } from "../helpers/spawn.js";
import { killSessions, mb, MB, nested, sampleRss, startSession, type Session } from "../helpers/hardening-session.js";

/**
 * protocol/README.md §7 against the real binary, at and just past each edge. Every
 * crossing is answered with -32003 LIMIT_EXCEEDED {limit, max, actual} (or a
 * LIMIT_EXCEEDED skip where protocol/README.md §7 says a single op is skipped),
 * changes nothing, and leaves other threads alone: a sentinel thread is read
 * before and after every crossing and must not move.
 */

afterEach(killSessions);

const FRAMINGS: readonly Framing[] = ["ndjson", "lsp"];

type Json = unknown;
type Err = { code: number; message: string; data?: Record<string, unknown> };

const SENTINEL = { threadId: "sentinel", state: { keep: [1, 2, 3], deep: { a: { b: "c" } } }, toolState: { "k/1": "v", "m~n": [0.5, null] } };

/** Opens the sentinel thread and returns what getState says about it. */
async function openSentinel(s: Session): Promise<Record<string, unknown>> {
  await s.ok("openRun", SENTINEL);
  const got = await s.ok("getState", { threadId: "sentinel" });
  expect(got).toEqual({ version: 1, state: { ...SENTINEL.state, toolState: SENTINEL.toolState } });
  return got;
}

/** Runs one crossing with the sentinel read just before and just after it. */
async function crossing<T>(s: Session, cross: () => Promise<T>): Promise<T> {
  const before = await s.ok("getState", { threadId: "sentinel" });
  const out = await cross();
  expect(await s.ok("getState", { threadId: "sentinel" }), "the sentinel thread moved").toEqual(before);
  return out;
}

const limitData = (limit: string, max: number, actual: unknown = expect.any(Number)): Record<string, unknown> => ({ code: "LIMIT_EXCEEDED", limit, max, actual });

function expectLimit(e: Err, limit: string, max: number, actual?: number): void {
  expect(e.code).toBe(-32003);
  expect(e.data).toEqual(limitData(limit, max, actual));
  if (actual === undefined) expect(e.data?.["actual"] as number).toBeGreaterThan(max);
}

/** A skip for a limit: no `op` echoed (protocol/README.md §4), the code, and a message. */
const limitSkip = (index: number): unknown => ({ index, code: "LIMIT_EXCEEDED", message: expect.any(String) });

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
      const s = startSession({ framing, args: ["--max-message-bytes", "4KiB"] });
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
    const s = startSession();
    await openSentinel(s);
    const MAX = 64 * MB;
    const big = (id: number, bytes: number): Buffer => {
      const head = Buffer.from(`{"jsonrpc":"2.0","id":${id},"method":"openRun","params":{"threadId":"big","state":{"s":"`);
      const tail = Buffer.from('"}}}\n');
      return Buffer.concat([head, Buffer.alloc(bytes - head.length - tail.length + 1, 0x78), tail]);
    };
    const t0 = performance.now();
    const r1 = await crossing(s, () => s.callRaw(1001, big(1001, MAX), 15_000));
    // Read and parsed whole: what stops it is the next limit, the state's size.
    expect("error" in r1 && r1.error).toMatchObject({ code: -32003, data: { limit: "maxStateBytes", max: 32 * MB } });
    const r2 = await crossing(s, () => s.callRaw(1002, big(1002, MAX + 1), 15_000));
    expect("error" in r2 && r2.error).toMatchObject({ code: -32003, data: limitData("maxMessageBytes", MAX, MAX + 1) });
    console.log(`64 MiB edge: both messages answered in ${(performance.now() - t0).toFixed(0)} ms`);
    expect((await s.fails("getState", { threadId: "big" })).data).toMatchObject({ reason: "never opened" });
  });

  it.each(FRAMINGS)("discards a 500 MB %s message as it streams in: RSS stays bounded and the next request is answered", async (framing) => {
    const s = startSession({ framing });
    await openSentinel(s);
    const before = await s.ok("getState", { threadId: "sentinel" });
    const idle = s.rss();
    const TOTAL = 500 * MB;
    const head = Buffer.from('{"jsonrpc":"2.0","id":7,"method":"parsePointer","params":{"pointer":"/');
    const tail = Buffer.from('"}}');
    const body = head.length + TOTAL + tail.length;
    const chunk = Buffer.alloc(MB, 0x78);
    const rss = sampleRss(s.pid, 5);
    const t0 = performance.now();
    await s.write(framing === "lsp" ? Buffer.concat([Buffer.from(`Content-Length: ${body}\r\n\r\n`), head]) : head);
    for (let i = 0; i < TOTAL / MB; i++) await s.write(chunk);
    const answer = s.callRaw(7, framing === "lsp" ? tail : Buffer.concat([tail, Buffer.from("\n")]), 15_000);
    const r = await answer;
    const next = await s.ok("escapePointer", { path: ["after"] });
    const ms = performance.now() - t0;
    const { peak, samples } = rss.stop();
    console.log(`500 MB ${framing} line: streamed and refused in ${ms.toFixed(0)} ms; VmRSS idle ${mb(idle)} MB, peak ${mb(peak)} MB over ${samples} samples`);
    expect("error" in r && r.error).toMatchObject({ code: -32003, data: limitData("maxMessageBytes", 64 * MB, body) });
    expect(next).toEqual({ pointer: "/after" });
    expect(peak).toBeLessThan(200 * MB);
    expect(await s.ok("getState", { threadId: "sentinel" })).toEqual(before);
  });
});

describe("--max-ops", { timeout: 20_000 }, () => {
  const ops = (n: number): Json[] => Array.from({ length: n }, (_, i) => ({ op: "add", path: `/o${i}`, value: i }));

  it.each([
    ["--max-ops 50", ["--max-ops", "50"], 50],
    ["the default 10,000", [], 10_000],
  ] as const)("applyOps and normalize take exactly max ops and refuse max+1 with -32003 (%s)", async (_, args, MAX) => {
    const s = startSession({ args });
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

describe("--max-depth 8", { timeout: 20_000 }, () => {
  const MAX = 8;
  const args = ["--max-depth", String(MAX)];

  it("openRun: a state nesting exactly max is kept; one deeper is -32003 and changes nothing", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    const r = await crossing(s, () => s.ok("openRun", { threadId: "t", state: nested(MAX) }));
    expect(r["version"]).toBe(1);
    expect(await s.ok("getState", { threadId: "t" })).toEqual({ version: 1, state: nested(MAX) });
    expectLimit(await crossing(s, () => s.fails("openRun", { threadId: "t", state: nested(MAX + 1) })), "maxDepth", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("openRun", { threadId: "fresh", state: nested(MAX + 1) })), "maxDepth", MAX, MAX + 1);
    expect(await s.ok("getState", { threadId: "t" })).toEqual({ version: 1, state: nested(MAX) });
    expect((await s.fails("getState", { threadId: "fresh" })).data).toMatchObject({ reason: "never opened" });
    // Namespace values count from the root: toolState.k sits two levels down.
    expect((await s.ok("openRun", { threadId: "n", toolState: { k: nested(MAX - 2) } }))["version"]).toBe(1);
    expectLimit(await crossing(s, () => s.fails("openRun", { threadId: "n", toolState: { k: nested(MAX - 1) } })), "maxDepth", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("diffToolState", { threadId: "n", set: { k: nested(MAX - 1) } })), "maxDepth", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("diffState", { threadId: "t", value: nested(MAX + 1) })), "maxDepth", MAX, MAX + 1);
    expect(await s.ok("getState", { threadId: "n", path: "/toolState/k" })).toEqual({ version: 1, state: nested(MAX - 2) });
  });

  it("applyOps: a value that makes the state exactly max deep applies; one level more is a LIMIT_EXCEEDED skip (-32002 when atomic)", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", state: {} });
    // The state {v: value} nests one more than the value.
    const ok = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [{ op: "add", path: "/v", value: nested(MAX - 1) }] }));
    expect(ok).toMatchObject({ version: 1, skipped: [] });
    const skip = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [{ op: "add", path: "/w", value: nested(MAX) }, { op: "add", path: "/z", value: 0 }] }));
    expect(skip).toEqual({ version: 2, delta: [{ op: "add", path: "/z", value: 0 }], skipped: [limitSkip(0)], events: [{ type: "STATE_DELTA", delta: [{ op: "add", path: "/z", value: 0 }] }] });
    const atomic = await crossing(s, () => s.fails("applyOps", { threadId: "t", atomic: true, ops: [{ op: "add", path: "/y", value: 1 }, { op: "add", path: "/w", value: nested(MAX) }] }));
    expect(atomic).toMatchObject({ code: -32002, data: { code: "LIMIT_EXCEEDED", index: 1 } });
    // The same value at the root is exactly max deep, and applies.
    const root = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [{ op: "replace", path: "", value: nested(MAX) }] }));
    expect(root).toMatchObject({ version: 3, skipped: [] });
    expect(await s.ok("getState", { threadId: "t" })).toEqual({ version: 3, state: nested(MAX) });
    // normalize follows the same rules.
    const norm = await crossing(s, () => s.ok("normalize", { ops: [{ op: "add", path: "/v", value: nested(MAX - 1) }, { op: "add", path: "/w", value: nested(MAX) }] }));
    expect(norm).toEqual({ delta: [{ op: "add", path: "/v", value: nested(MAX - 1) }], skipped: [limitSkip(1)], state: { v: nested(MAX - 1) } });
  });

  it("applyOps: a value nesting past max refuses the whole message with -32003 (the params walk, protocol/README.md §7)", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", state: { keep: true } });
    for (const method of ["applyOps", "normalize"] as const) {
      const params = (value: Json): Record<string, unknown> => ({ ...(method === "applyOps" ? { threadId: "t" } : {}), ops: [{ op: "add", path: "/ok", value: 1 }, { op: "replace", path: "", value }] });
      const e = await crossing(s, () => s.fails(method, params(nested(MAX + 1))));
      expectLimit(e, "maxDepth", MAX);
      // Far past the limit (100,000 levels): refused the same way, no stack overflow, still serving.
      const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
      const wire = `{"jsonrpc":"2.0","id":"deep-${method}","method":"${method}","params":${JSON.stringify(params("@@")).replace('"@@"', deep)}}\n`;
      const r = await crossing(s, () => s.callRaw(`deep-${method}`, wire));
      expect("error" in r && r.error).toMatchObject({ code: -32003, data: { limit: "maxDepth", max: MAX } });
    }
    expect(await s.ok("getState", { threadId: "t" })).toEqual({ version: 1, state: { keep: true } });
  });

  it("pointers: exactly max segments are followed; max+1 is -32003 (getState, diffState) or a LIMIT_EXCEEDED skip (applyOps)", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    // A chain exactly MAX deep: the innermost object is reached with MAX - 1 segments.
    await s.ok("openRun", { threadId: "t", state: chain(MAX - 1, {}) });
    const deepest = "/a".repeat(MAX - 1) + "/leaf";
    const add = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [{ op: "add", path: deepest, value: "here" }] }));
    expect(add).toMatchObject({ version: 2, skipped: [], delta: [{ op: "add", path: deepest, value: "here" }] });
    expect(await s.ok("getState", { threadId: "t", path: deepest })).toEqual({ version: 2, state: "here" });
    expect(await s.ok("getState", { threadId: "t", path: deepest.split("/").slice(1) })).toEqual({ version: 2, state: "here" });
    expect(await s.ok("diffState", { threadId: "t", path: deepest, value: "there" })).toMatchObject({ version: 3, delta: [{ op: "replace", path: deepest, value: "there" }] });

    const tooDeep = deepest + "/x";
    expectLimit(await crossing(s, () => s.fails("getState", { threadId: "t", path: tooDeep })), "maxDepth", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("getState", { threadId: "t", path: tooDeep.split("/").slice(1) })), "maxDepth", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("diffState", { threadId: "t", path: tooDeep, value: 1 })), "maxDepth", MAX, MAX + 1);
    // With the params, before the thread (protocol/README.md §6, the order of checks): an unknown thread still gets -32003.
    expectLimit(await crossing(s, () => s.fails("getState", { threadId: "nobody", path: tooDeep })), "maxDepth", MAX, MAX + 1);
    for (const op of [
      { op: "add", path: tooDeep, value: 1 },
      { op: "copy", from: deepest, path: tooDeep },
      { op: "move", from: "/a", path: "/b" + "/c".repeat(MAX) },
    ]) {
      const r = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [op] }));
      expect(r, JSON.stringify(op)).toEqual({ version: 3, delta: [], skipped: [limitSkip(0)], events: [] });
    }
    expect(await s.ok("getState", { threadId: "t", path: deepest })).toEqual({ version: 3, state: "there" });
  });

  // BUG (reported): normalize's `state` param is not held to --max-depth.
  // openRun refuses a state one level past the limit with -32003, but
  // normalize takes one up to two levels past it (only the params scan, at
  // maxDepth + ENVELOPE_DEPTH, stops deeper ones). Remove `.fails` once fixed.
  it("normalize: a `state` one level past max is refused with -32003, as openRun's is", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    expect(await s.ok("normalize", { ops: [], state: nested(MAX) })).toEqual({ delta: [], skipped: [], state: nested(MAX) });
    expectLimit(await crossing(s, () => s.fails("normalize", { ops: [], state: nested(MAX + 1) })), "maxDepth", MAX, MAX + 1);
  });
});

describe("--max-state-bytes", { timeout: 20_000 }, () => {
  // Sizes are the approximate figure of protocol/README.md §7: compact JSON plus one byte per member or element.
  const MAX = 1000;
  const args = ["--max-state-bytes", String(MAX)];
  const stateBytes = async (s: Session): Promise<number> => (await s.ok("stats"))["stateBytes"] as number;

  it("applyOps grows a thread to exactly max; one byte more is a LIMIT_EXCEEDED skip (-32002 atomic), and nothing changes", async () => {
    const s = startSession({ args });
    const base = await stateBytes(s);
    await s.ok("openRun", { threadId: "sentinel", state: { s: 1 } });
    const sentinelBytes = (await stateBytes(s)) - base;
    await s.ok("openRun", { threadId: "t", state: {} });
    // {} is 2; "s":"…" adds 5 + (L + 2).
    const r = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [{ op: "add", path: "/s", value: "x".repeat(MAX - 9) }] }));
    expect(r).toMatchObject({ version: 1, skipped: [] });
    expect((await stateBytes(s)) - base - sentinelBytes).toBe(MAX);
    // A replace that is one byte longer, and a new member: both past the limit.
    const past = await crossing(s, () =>
      s.ok("applyOps", { threadId: "t", ops: [{ op: "replace", path: "/s", value: "x".repeat(MAX - 8) }, { op: "add", path: "/t", value: 0 }, { op: "copy", from: "/s", path: "/u" }] }),
    );
    expect(past).toEqual({ version: 1, delta: [], skipped: [limitSkip(0), limitSkip(1), limitSkip(2)], events: [] });
    const atomic = await crossing(s, () => s.fails("applyOps", { threadId: "t", atomic: true, ops: [{ op: "remove", path: "/s" }, { op: "add", path: "/s", value: "x".repeat(MAX - 8) }] }));
    expect(atomic).toMatchObject({ code: -32002, data: { code: "LIMIT_EXCEEDED", index: 1 } });
    expect(await s.ok("getState", { threadId: "t" })).toEqual({ version: 1, state: { s: "x".repeat(MAX - 9) } });
    // Shrinking and growing back within the limit still works.
    expect(await s.ok("applyOps", { threadId: "t", ops: [{ op: "replace", path: "/s", value: "" }, { op: "add", path: "/t", value: "x".repeat(MAX - 16) }] })).toMatchObject({ version: 2, skipped: [] });
    expect((await stateBytes(s)) - base - sentinelBytes).toBe(MAX);
  });

  it("openRun, diffState and diffToolState: exactly max is kept, max+1 is -32003 with the size it would have", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    // {"s":"…"}: 2 + 5 + L + 2.
    expect(await crossing(s, () => s.ok("openRun", { threadId: "o", state: { s: "x".repeat(MAX - 9) } }))).toMatchObject({ version: 1 });
    expectLimit(await crossing(s, () => s.fails("openRun", { threadId: "o", state: { s: "x".repeat(MAX - 8) } })), "maxStateBytes", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("openRun", { threadId: "new", state: { s: "x".repeat(MAX - 8) } })), "maxStateBytes", MAX, MAX + 1);
    expect((await s.fails("getState", { threadId: "new" })).data).toMatchObject({ reason: "never opened" });
    expectLimit(await crossing(s, () => s.fails("diffState", { threadId: "o", path: "/s", value: "x".repeat(MAX - 8) })), "maxStateBytes", MAX, MAX + 1);
    expect(await s.ok("diffState", { threadId: "o", path: "/s", value: "y".repeat(MAX - 9) })).toMatchObject({ version: 2 });
    // {"toolState":{}} is 17; "k":"…" adds 5 + L + 2.
    await s.ok("openRun", { threadId: "n", toolState: {} });
    expect(await crossing(s, () => s.ok("diffToolState", { threadId: "n", set: { k: "x".repeat(MAX - 24) } }))).toMatchObject({ version: 2 });
    expectLimit(await crossing(s, () => s.fails("diffToolState", { threadId: "n", set: { k: "x".repeat(MAX - 23) } })), "maxStateBytes", MAX, MAX + 1);
    expectLimit(await crossing(s, () => s.fails("openRun", { threadId: "n", toolState: { k: "x".repeat(MAX - 23) } })), "maxStateBytes", MAX, MAX + 1);
    expect(await s.ok("getState", { threadId: "n" })).toEqual({ version: 2, state: { toolState: { k: "x".repeat(MAX - 24) } } });
    expect(await s.ok("getState", { threadId: "o" })).toEqual({ version: 2, state: { s: "y".repeat(MAX - 9) } });
  });

  /** A value of about 64 KB: 2,000 small objects, so a copy costs real memory (strings alone would be shared). */
  const value64k = (): Json => Array.from({ length: 2000 }, (_, i) => ({ i, s: "abcdefghijklmno" }));

  it("a copy bomb (30 doubling copies of the root, 64 KB to start) is refused before memory is spent: RSS bounded, answered within a second", async () => {
    const LIMIT = 4 * MB;
    const s = startSession({ args: ["--max-state-bytes", "4MiB"] });
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", state: { v: value64k() } });
    const start = ((await s.ok("stats"))["stateBytes"] as number);
    const idle = s.rss();
    const bomb = Array.from({ length: 30 }, (_, i) => ({ op: "copy", from: "", path: `/k${i}` }));
    const rss = sampleRss(s.pid, 2);
    for (const [method, params] of [
      ["applyOps", { threadId: "t", ops: bomb }],
      ["applyOps", { threadId: "t", ops: bomb.map((o, i) => ({ ...o, path: `/z${i}` })), atomic: true }],
      ["normalize", { ops: bomb, state: { v: value64k() } }],
    ] as const) {
      const t0 = performance.now();
      const r = await crossing(s, () => s.call(method, params, { ms: 5000 }));
      const ms = performance.now() - t0;
      console.log(`copy bomb via ${method}${"atomic" in params ? " (atomic)" : ""}: answered in ${ms.toFixed(0)} ms`);
      expect(ms).toBeLessThan(1000);
      if ("atomic" in params) {
        expect("error" in r && r.error).toMatchObject({ code: -32002, data: { code: "LIMIT_EXCEEDED" } });
        continue;
      }
      const out = (r as { result: { delta: unknown[]; skipped: { index: number; code: string }[] } }).result;
      // Each copy doubles the state: 64 KB reaches 4 MiB after 6 of them; every later one is refused.
      expect(out.delta.length).toBeGreaterThanOrEqual(5);
      expect(out.delta.length).toBeLessThanOrEqual(7);
      expect(out.skipped.length).toBe(30 - out.delta.length);
      for (const sk of out.skipped) expect(sk).toEqual(limitSkip(sk.index));
    }
    const { peak } = rss.stop();
    const stats = await s.ok("stats");
    console.log(`copy bomb: state ${mb(start)} -> ${mb((stats["stateBytes"] as number))} MB (limit 4 MiB per thread); VmRSS idle ${mb(idle)} MB, peak ${mb(peak)} MB`);
    expect((await s.ok("getState", { threadId: "t", path: "/k0/v/1999" }))["state"]).toEqual({ i: 1999, s: "abcdefghijklmno" });
    expect(stats["stateBytes"] as number).toBeLessThanOrEqual(2 * LIMIT);
    expect(peak - idle).toBeLessThan(150 * MB);
  });

  it("a move bomb (moves into deeper and deeper paths) is refused at maxDepth: each call answered within a second, RSS bounded", async () => {
    const s = startSession();
    await openSentinel(s);
    // x: 2,000 small objects in an array, 2 levels below x, so the state is 3 deep.
    await s.ok("openRun", { threadId: "t", state: { x: value64k(), c: chain(100) } });
    const idle = s.rss();
    const rss = sampleRss(s.pid, 2);
    // Each round wraps x one level deeper: add /w {}, move x under it, move that back to /x.
    // 253 rounds take the state to exactly 256 deep (the default maxDepth).
    const round = [
      { op: "add", path: "/w", value: {} },
      { op: "move", from: "/x", path: "/w/x" },
      { op: "move", from: "/w", path: "/x" },
    ];
    const t0 = performance.now();
    const grow = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: Array.from({ length: 253 }, () => round).flat() }, 5000));
    const ms1 = performance.now() - t0;
    expect(grow["skipped"]).toEqual([]);
    expect(depthOf((await s.ok("getState", { threadId: "t" }))["state"])).toBe(256);
    // Then every move of x to a deeper place: under a new /w, and down the 100-deep chain /c/a/a/…
    const deeper = [
      ...Array.from({ length: 50 }, (_, i) => [{ op: "add", path: `/w${i}`, value: {} }, { op: "move", from: "/x", path: `/w${i}/x` }]).flat(),
      ...Array.from({ length: 100 }, (_, i) => ({ op: "move", from: "/x", path: "/c" + "/a".repeat(i) + "/x" })),
      // The inner part of x moved up (shallower: allowed), then back down past the limit.
      { op: "move", from: "/x/x", path: "/up" },
      { op: "move", from: "/up", path: "/c/a/up" },
    ];
    const t1 = performance.now();
    const r = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: deeper }, 5000));
    const ms2 = performance.now() - t1;
    const { peak } = rss.stop();
    const skipped = r["skipped"] as { index: number; code: string }[];
    console.log(`move bomb: 759 deepening ops in ${ms1.toFixed(0)} ms; ${deeper.length} more in ${ms2.toFixed(0)} ms, ${skipped.length} refused; VmRSS idle ${mb(idle)} MB, peak ${mb(peak)} MB`);
    expect(skipped.map((sk) => sk.index)).toEqual([...Array.from({ length: 50 }, (_, i) => 2 * i + 1), ...Array.from({ length: 100 }, (_, i) => 100 + i), 201]);
    for (const sk of skipped) expect(sk).toEqual(limitSkip(sk.index));
    expect(ms1).toBeLessThan(1000);
    expect(ms2).toBeLessThan(1000);
    expect(peak - idle).toBeLessThan(100 * MB);
    expect(depthOf((await s.ok("getState", { threadId: "t" }))["state"])).toBeLessThanOrEqual(256);
  });

  // BUG (reported): a move is never checked against --max-state-bytes
  // (src/core/apply.ts move(): the byte count is adjusted, never compared).
  // Moving a member to a longer name grows the thread by the difference
  // (protocol/README.md §7: a member costs its name + 4), so a thread at its limit can be
  // taken past it without bound, one request at a time, and the memory is
  // really spent (the names are stored). Remove `.fails` once fixed.
  it("a move to a longer member name that would pass max is a LIMIT_EXCEEDED skip", async () => {
    const s = startSession({ args });
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", state: { a: 1 } });
    const r = await crossing(s, () => s.ok("applyOps", { threadId: "t", ops: [{ op: "move", from: "/a", path: "/" + "k".repeat(5000) }] }));
    expect(r).toEqual({ version: 1, delta: [], skipped: [limitSkip(0)], events: [] });
  });

  // BUG (reported): the cost of a call is not bounded by the limits. Every
  // move to a deeper path walks the whole moved value to measure its depth
  // (src/core/apply.ts move(), the measure() under "Only a move to a deeper
  // path can deepen the state"), ~40 ms for a 200,000-member value, so 2,500
  // round trips of it (a 220 KB request, well inside every limit) keep the
  // process busy for about 100 s, during which no other thread is served.
  // The call is given 1 s here and the child is killed after. Remove `.fails` once fixed.
  it("2,500 deepening moves of a 3 MB value are answered within a second", async () => {
    const s = startSession();
    const big: Record<string, number> = {};
    for (let i = 0; i < 200_000; i++) big[`m${i}`] = i;
    await s.ok("openRun", { threadId: "t", state: { big, w: {} } });
    const ops = Array.from({ length: 2500 }, () => [
      { op: "move", from: "/big", path: "/w/big" },
      { op: "move", from: "/w/big", path: "/big" },
    ]).flat();
    const r = await s.call("applyOps", { threadId: "t", ops }, { ms: 1000 });
    expect(r).toMatchObject({ result: { skipped: [] } });
  });
});

/** An object chain {a:{a:…}} `depth` containers deep, with `leaf` innermost. */
function chain(depth: number, leaf: Json = 1): Json {
  let v: Json = leaf;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

function depthOf(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  let d = 0;
  for (const x of Object.values(v)) d = Math.max(d, depthOf(x));
  return d + 1;
}

describe("--max-threads 3", { timeout: 20_000 }, () => {
  it("evicts the least recently used thread; evicted, closed and never-opened threads are told apart; stats counts evictions", async () => {
    const s = startSession({ args: ["--max-threads", "3"] });
    await openSentinel(s);
    await s.ok("openRun", { threadId: "a", state: { a: 1 } });
    await s.ok("openRun", { threadId: "b", toolState: { b: 2 } });
    // Use makes recent: the sentinel and b are touched, so a is the least recently used.
    await s.ok("getState", { threadId: "sentinel" });
    await s.ok("getState", { threadId: "b" });
    expect(await s.ok("stats")).toMatchObject({ threads: 3, evicted: 0 });

    const r = await crossing(s, () => s.ok("openRun", { threadId: "c", state: { c: 3 } }));
    expect(r["version"]).toBe(1);
    expect(await s.ok("stats")).toMatchObject({ threads: 3, evicted: 1 });
    const evicted = { code: "UNKNOWN_THREAD", threadId: "a", reason: "evicted" };
    for (const [method, params] of [
      ["getState", { threadId: "a" }],
      ["applyOps", { threadId: "a", ops: [] }],
      ["diffState", { threadId: "a", value: 1 }],
      ["diffToolState", { threadId: "a", set: {} }],
    ] as const) {
      const e = await crossing(s, () => s.fails(method, params));
      expect(e.code, method).toBe(-32001);
      expect(e.data, method).toEqual(evicted);
    }
    expect(await s.ok("getState", { threadId: "b" })).toEqual({ version: 1, state: { toolState: { b: 2 } } });

    expect(await s.ok("closeThread", { threadId: "b" })).toEqual({ closed: true });
    expect((await s.fails("getState", { threadId: "b" })).data).toEqual({ code: "UNKNOWN_THREAD", threadId: "b", reason: "closed" });
    expect((await s.fails("getState", { threadId: "zz" })).data).toEqual({ code: "UNKNOWN_THREAD", threadId: "zz", reason: "never opened" });
    expect(await s.ok("closeThread", { threadId: "zz" })).toEqual({ closed: false });
    expect(await s.ok("stats")).toMatchObject({ threads: 2, evicted: 1 });

    // A refused openRun neither creates a thread nor evicts one (protocol/README.md §6, openRun).
    await s.ok("openRun", { threadId: "d", state: {} });
    expect((await crossing(s, () => s.fails("openRun", { threadId: "e", state: {}, ifVersion: 5 }))).code).toBe(-32004);
    expect(await s.ok("stats")).toMatchObject({ threads: 3, evicted: 1 });

    // Reopening an evicted id starts it again at version 0 (then 1), and evicts the next least recently used (c).
    await s.ok("getState", { threadId: "sentinel" });
    await s.ok("getState", { threadId: "d" });
    expect(await crossing(s, () => s.ok("openRun", { threadId: "a", state: { again: true } }))).toMatchObject({ version: 1 });
    expect(await s.ok("stats")).toMatchObject({ threads: 3, evicted: 2 });
    expect((await s.fails("getState", { threadId: "c" })).data).toEqual({ code: "UNKNOWN_THREAD", threadId: "c", reason: "evicted" });
    expect(await s.ok("getState", { threadId: "a" })).toEqual({ version: 1, state: { again: true } });
  });
});

describe("numbers", { timeout: 20_000 }, () => {
  // Integer literals a double cannot hold exactly (the first ones past ±(2^53 - 1) that lose digits, and
  // longer ones). 2^53 itself and other integers a double holds exactly are left out on purpose: whether
  // they pass is being changed in the working tree as this is written (src/rpc/json-text.ts).
  const BIG = ["12345678901234567890", "-9007199254740993", "9007199254740993", "-18014398509481985", "123456789012345678901234567890"];
  const SAFE = ["9007199254740991", "-9007199254740991", "1234567890123456"];
  const FLOATS = ["6.02e23", "1e300", "-1.7976931348623157e308", "5e-324", "0.1", "12345678901234567890.5", "1.2345678901234567e+89", "1E21"];

  /** A call written as wire text, with `@N@` replaced by the literal. */
  const wire = (id: string, method: string, params: string): string => `{"jsonrpc":"2.0","id":"${id}","method":"${method}","params":${params}}\n`;

  it("refuses an integer literal beyond ±(2^53 - 1) anywhere in params with -32602 UNSAFE_INTEGER naming its path, and changes nothing", async () => {
    const s = startSession();
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", toolState: { keep: 1 } });
    const places: [string, string, (n: string) => string][] = [
      ["openRun", "/state/a/0/b", (n) => `{"threadId":"t","state":{"a":[{"b":${n}}]}}`],
      ["openRun", "/toolState/a~1b~0c/2", (n) => `{"threadId":"t","toolState":{"a/b~c":[1,2,${n}]}}`],
      ["openRun", '/toolState/q"\\u00e9', (n) => `{"threadId":"t","toolState":{"q\\"\\u00e9":${n}}}`],
      ["applyOps", "/ops/1/value/id", (n) => `{"threadId":"t","ops":[{"op":"add","path":"/toolState/x","value":1},{"op":"add","path":"/toolState/y","value":{"name":"12345678901234567890","id":${n}}}]}`],
      ["applyOps", "/ifVersion", (n) => `{"threadId":"t","ops":[],"ifVersion":${n}}`],
      ["diffToolState", "/set/k", (n) => `{"threadId":"t","set":{"k":${n}}}`],
      ["diffToolState", "/toolState/k/deep/0", (n) => `{"threadId":"t","toolState":{"k":{"deep":[${n}]}}}`],
      ["diffState", "/value", (n) => `{"threadId":"t","path":"/toolState/keep","value":${n}}`],
      ["normalize", "/state/n", (n) => `{"ops":[],"state":{"n":${n}}}`],
      ["normalize", "/ops/0/value", (n) => `{"ops":[{"op":"test","path":"","value":${n}}]}`],
      ["escapePointer", "/path/0", (n) => `{"path":[${n}]}`],
    ];
    let k = 0;
    for (const n of BIG) {
      for (const [method, field, params] of places) {
        const id = `u${k++}`;
        const r = await crossing(s, () => s.callRaw(id, wire(id, method, params(n))));
        expect("error" in r && r.error, `${method} ${field} ${n}`).toMatchObject({ code: -32602, data: { code: "INVALID_PARAMS", field: field.replace("\\u00e9", "é"), reason: "UNSAFE_INTEGER" } });
      }
    }
    // A literal beyond a double's range would arrive as Infinity and be sent as null: refused as well.
    for (const n of ["1e400", "-1e400"]) {
      for (const [method, field, params] of places.slice(0, 4)) {
        const id = `o${k++}`;
        const r = await crossing(s, () => s.callRaw(id, wire(id, method, params(n))));
        expect("error" in r && r.error, `${method} ${field} ${n}`).toMatchObject({ code: -32602, data: { code: "INVALID_PARAMS", field: field.replace("\\u00e9", "é"), reason: "NUMBER_OVERFLOW" } });
      }
    }
    // In a batch, each element on its own.
    const batch = `[${wire("b1", "normalize", `{"ops":[],"state":{"n":${BIG[0]}}}`).trim()},${wire("b2", "escapePointer", '{"path":["ok"]}').trim()}]\n`;
    await s.write(batch);
    await s.until(() => s.frames.some((f) => Array.isArray(f)), "the batch reply");
    const reply = s.frames.find((f) => Array.isArray(f)) as { id: string; error?: Err; result?: unknown }[];
    expect(reply).toHaveLength(2);
    expect(reply.find((x) => x.id === "b1")?.error).toMatchObject({ code: -32602, data: { field: "/state/n", reason: "UNSAFE_INTEGER" } });
    expect(reply.find((x) => x.id === "b2")?.result).toEqual({ pointer: "/ok" });
    expect(await s.ok("getState", { threadId: "t" })).toEqual({ version: 1, state: { toolState: { keep: 1 } } });
  });

  it("passes safe integers and floats such as 6.02e23 and 1e300 through unchanged, end to end", async () => {
    const s = startSession();
    await openSentinel(s);
    const literals = [...SAFE, ...FLOATS];
    const list = `[${literals.join(",")}]`;
    const expected = JSON.parse(list) as number[];
    const same = (got: unknown): void => {
      expect(Array.isArray(got)).toBe(true);
      const arr = got as number[];
      expect(arr).toHaveLength(expected.length);
      arr.forEach((x, i) => expect(Object.is(x, expected[i]), `${literals[i]} came back as ${x}`).toBe(true));
    };
    const r1 = await crossing(s, () => s.callRaw("f1", wire("f1", "openRun", `{"threadId":"f","state":{"n":${list}},"toolState":{"n":${list}}}`)));
    expect("result" in r1).toBe(true);
    const r2 = await s.callRaw("f2", wire("f2", "applyOps", `{"threadId":"f","ops":[{"op":"add","path":"/m","value":${list}},{"op":"test","path":"/m/4","value":${literals[4]}}]}`));
    same((r2 as { result: { delta: { value: unknown }[] } }).result.delta[0]?.value);
    const r3 = await s.callRaw("f3", wire("f3", "diffToolState", `{"threadId":"f","set":{"k":${list}}}`));
    same((r3 as { result: { delta: { value: unknown }[] } }).result.delta[0]?.value);
    const r4 = await s.callRaw("f4", wire("f4", "normalize", `{"ops":[{"op":"add","path":"/n","value":${list}}]}`));
    same((r4 as { result: { state: { n: unknown } } }).result.state.n);
    const got = (await s.ok("getState", { threadId: "f" }))["state"] as Record<string, unknown>;
    same(got["n"]);
    same(got["m"]);
    same((got["toolState"] as Record<string, unknown>)["n"]);
    same((got["toolState"] as Record<string, unknown>)["k"]);
    // A 20-digit id sent as a string stays a string.
    expect(await s.ok("diffState", { threadId: "f", path: "/id", value: "12345678901234567890" })).toMatchObject({ delta: [{ op: "add", path: "/id", value: "12345678901234567890" }] });
  });
});
