import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import {
  COMMANDS,
  encode,
  errorOf,
  killAll,
  lsp,
  ndjson,
  notification,
  parseFrames,
  parseLog,
  parseLsp,
  parseNdjson,
  request,
  responses,
  resultOf,
  run,
  start,
  type Command,
  type Framing,
  type Response,
} from "../helpers/spawn.js";

/**
 * The built sidecar as a black box (protocol/README.md §2, §7, §8): JSON-RPC 2.0 over
 * stdin/stdout, both framings, shutdown, and hostile input. Every test runs
 * against the single executable and against the node bundle.
 */

afterEach(killAll);

const FRAMINGS: readonly Framing[] = ["ndjson", "lsp"];

/**
 * An error response as it must appear on the wire; the message text is free.
 * Every error's data carries a string code (protocol/README.md §8), plus `data` if given.
 */
const error = (id: string | number | null, code: number, data: Record<string, unknown> = {}): unknown => ({
  jsonrpc: "2.0",
  id,
  error: { code, message: expect.any(String), data: expect.objectContaining({ code: expect.any(String), ...data }) },
});
const result = (id: string | number | null, value: unknown): unknown => ({ jsonrpc: "2.0", id, result: value });

const escape = (id: number | string | null, segment: string): Record<string, unknown> => request(id, "escapePointer", { path: [segment] });
const escaped = (id: number | string | null, segment: string): unknown => result(id, { pointer: "/" + segment.replaceAll("~", "~0").replaceAll("/", "~1") });

/** A tiny deterministic PRNG (mulberry32), so the junk is the same on every run. */
function junk(seed: number, length: number): Buffer {
  let a = seed;
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    out[i] = ((t ^ (t >>> 14)) >>> 0) & 0xff;
  }
  return out;
}

describe.each(COMMANDS)("$name", { timeout: 20_000 }, (cmd: Command) => {
  /** Sends `input`, ends stdin, asserts exit 0 and returns stdout parsed strictly as `framing`. */
  async function exchange(input: string | Buffer, framing: Framing = "ndjson", args: readonly string[] = []): Promise<unknown[]> {
    const r = await run(cmd, args, input);
    expect(r, r.stderr).toMatchObject({ code: 0, signal: null });
    return parseFrames(framing, r.stdout);
  }

  describe("the JSON-RPC 2.0 specification's examples (§7), on our methods", () => {
    it("answers a call with named params with its result under the request's id", async () => {
      const frames = await exchange(
        ndjson(
          { jsonrpc: "2.0", method: "escapePointer", params: { path: ["a/b", "m~n", 0] }, id: 3 },
          { jsonrpc: "2.0", method: "parsePointer", params: { pointer: "/a~1b/m~0n" }, id: 4 },
          { jsonrpc: "2.0", method: "stats", params: {}, id: "s" },
        ),
      );
      expect(frames).toEqual([
        result(3, { pointer: "/a~1b/m~0n/0" }),
        result(4, { path: ["a/b", "m~n"] }),
        result("s", expect.objectContaining({ threads: 0, version: expect.any(String), limits: expect.any(Object) })),
      ]);
    });

    it("answers positional (array) params with -32602, reason POSITIONAL_PARAMS, under the request's id", async () => {
      const frames = await exchange(ndjson({ jsonrpc: "2.0", method: "escapePointer", params: [["a"]], id: 1 }));
      expect(frames).toEqual([error(1, -32602, { code: "INVALID_PARAMS", reason: "POSITIONAL_PARAMS" })]);
    });

    it("sends nothing at all for notifications, even failing ones", async () => {
      const r = await run(
        cmd,
        [],
        ndjson(notification("escapePointer", { path: ["a"] }), notification("stats"), notification("foobar"), notification("parsePointer", { pointer: "no-slash" }), notification("escapePointer", [["a"]])),
      );
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.length).toBe(0);
    });

    it("answers the request after a notification, and only it", async () => {
      expect(await exchange(ndjson(notification("escapePointer", { path: ["a"] }), escape(1, "b")))).toEqual([escaped(1, "b")]);
    });

    it("answers a call of a non-existent method with -32601 under the request's id", async () => {
      expect(await exchange(ndjson({ jsonrpc: "2.0", method: "foobar", id: "1" }))).toEqual([error("1", -32601)]);
    });

    it("answers invalid JSON with one -32700 whose id is null", async () => {
      expect(await exchange('{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]\n')).toEqual([error(null, -32700)]);
    });

    it("answers an invalid Request object with -32600 whose id is null", async () => {
      expect(await exchange('{"jsonrpc": "2.0", "method": 1, "params": "bar"}\n')).toEqual([error(null, -32600)]);
    });

    it("answers a batch that is invalid JSON with a single -32700, not an array", async () => {
      const frames = await exchange('[{"jsonrpc": "2.0", "method": "stats", "params": {}, "id": "1"},{"jsonrpc": "2.0", "method"]\n');
      expect(frames).toEqual([error(null, -32700)]);
    });

    it("answers an empty array with a single -32600, not an array", async () => {
      expect(await exchange("[]\n")).toEqual([error(null, -32600)]);
    });

    it("answers a non-empty invalid batch [1] with an array of one -32600", async () => {
      expect(await exchange("[1]\n")).toEqual([[error(null, -32600)]]);
    });

    it("answers an invalid batch [1,2,3] with an array of three -32600", async () => {
      expect(await exchange("[1,2,3]\n")).toEqual([[error(null, -32600), error(null, -32600), error(null, -32600)]]);
    });

    it("answers a mixed batch with an array of responses that leaves out the notification", async () => {
      const batch = [
        { jsonrpc: "2.0", method: "escapePointer", params: { path: ["x/y"] }, id: "1" },
        { jsonrpc: "2.0", method: "escapePointer", params: { path: ["hello"] } },
        { jsonrpc: "2.0", method: "parsePointer", params: { pointer: "/42/23" }, id: "2" },
        { foo: "boo" },
        { jsonrpc: "2.0", method: "foo.get", params: { name: "myself" }, id: "5" },
        { jsonrpc: "2.0", method: "stats", id: "9" },
      ];
      const frames = await exchange(ndjson(batch));
      expect(frames).toHaveLength(1);
      const answers = frames[0] as Response[];
      expect(Array.isArray(answers)).toBe(true);
      // JSON-RPC 2.0 §6 lets a batch's responses come in any order: match them by id.
      expect(answers).toHaveLength(5);
      expect(answers).toEqual(
        expect.arrayContaining([
          escaped("1", "x/y"),
          result("2", { path: ["42", "23"] }),
          error(null, -32600),
          error("5", -32601),
          result("9", expect.objectContaining({ threads: 0 })),
        ]),
      );
    });

    it("answers a batch of only notifications with nothing at all", async () => {
      const r = await run(cmd, [], ndjson([notification("escapePointer", { path: ["a"] }), notification("stats")]));
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.length).toBe(0);
    });

    it("answers a request whose id is null, with id null", async () => {
      expect(await exchange(ndjson(escape(null, "a")))).toEqual([escaped(null, "a")]);
    });
  });

  describe("framing (protocol/README.md §2)", () => {
    it.each(FRAMINGS)("detects %s input and replies in the same framing", async (framing) => {
      const frames = await exchange(encode(framing, escape(1, "a/b"), escape(2, "c~d")), framing);
      expect(frames).toEqual([escaped(1, "a/b"), escaped(2, "c~d")]);
    });

    it.each(FRAMINGS)("detects %s past leading whitespace and newlines in the same chunk", async (framing) => {
      const input = Buffer.concat([Buffer.from(" \r\n\n\t \n"), encode(framing, escape(1, "a"))]);
      expect(await exchange(input, framing)).toEqual([escaped(1, "a")]);
    });

    it.each(FRAMINGS)("detects %s when leading whitespace arrives alone, before the first message", async (framing) => {
      const s = start(cmd);
      await s.write("\n\r\n  \n");
      await sleep(100);
      await s.write(encode(framing, escape(1, "a")));
      await s.until(() => s.stdout.length > 0, "a reply");
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0 });
      expect(parseFrames(framing, s.stdout)).toEqual([escaped(1, "a")]);
    });

    it("under --framing ndjson reads Content-Length headers as lines, not as framing", async () => {
      // Lines: "Content-Length: N" (not JSON), a blank one, then the body on its own line.
      const input = Buffer.concat([lsp(escape(1, "a")), Buffer.from("\n")]);
      expect(await exchange(input, "ndjson", ["--framing", "ndjson"])).toEqual([error(null, -32700), escaped(1, "a")]);
    });

    it("under --framing lsp reads a leading { as a bad header block, not as NDJSON", async () => {
      const input = Buffer.concat([Buffer.from('{"x":1}\r\n\r\n'), lsp(escape(1, "a"))]);
      expect(await exchange(input, "lsp", ["--framing", "lsp"])).toEqual([error(null, -32600), escaped(1, "a")]);
    });

    it("under --framing lsp answers LSP frames in LSP framing", async () => {
      expect(await exchange(lsp(escape(1, "a"), escape(2, "b")), "lsp", ["--framing", "lsp"])).toEqual([escaped(1, "a"), escaped(2, "b")]);
    });
  });

  describe.each(FRAMINGS)("stdout carries %s frames only", (framing) => {
    it("even at --log-level debug, with bad requests logged, and every stderr line is a pino JSON record", async () => {
      const input = Buffer.concat([
        encode(
          framing,
          escape(1, "a"),
          '{"jsonrpc":"2.0","id":2,"method":', // malformed JSON
          request(3, "nope"), // unknown method
          request(4, "parsePointer", { pointer: 5 }), // wrong type
          request(5, "parsePointer", { pointer: "no-slash" }), // INVALID_POINTER
          request(6, "escapePointer", { path: ["a"], extra: 1 }), // unknown param
          request(7, "getState", { threadId: "never" }), // -32001
          notification("nope"),
          [request(8, "nope"), 1],
          request(9, "parsePointer", { pointer: "/x" }),
        ),
        // Cut off at EOF: dropped, with a warning on stderr.
        Buffer.from(framing === "ndjson" ? '{"jsonrpc":"2.0","id":10,"meth' : 'Content-Length: 100\r\n\r\n{"jsonrpc":"2.0","id":10'),
      ]);
      const r = await run(cmd, ["--log-level", "debug"], input);
      expect(r.code, r.stderr).toBe(0);
      expect(parseFrames(framing, r.stdout)).toEqual([
        escaped(1, "a"),
        error(null, -32700),
        error(3, -32601),
        error(4, -32602, { code: "INVALID_PARAMS", field: "/pointer" }),
        error(5, -32602, { code: "INVALID_PARAMS", reason: "INVALID_POINTER" }),
        error(6, -32602, { code: "INVALID_PARAMS", reason: "UNKNOWN_PARAM" }),
        error(7, -32001, { code: "UNKNOWN_THREAD", threadId: "never" }),
        [error(8, -32601), error(null, -32600)],
        result(9, { path: ["x"] }),
      ]);
      const records = parseLog(r.stderr);
      expect(records.some((rec) => rec.level === 20)).toBe(true);
      expect(records.some((rec) => rec.level >= 40)).toBe(true);
    });
  });

  describe("shutdown (protocol/README.md §2)", () => {
    it("exits 0 with nothing on stdout when stdin ends before any input", async () => {
      const r = await run(cmd, [], "");
      expect(r).toMatchObject({ code: 0, signal: null });
      expect(r.stdout.length).toBe(0);
    });

    it("answers all 50 requests written in one chunk when stdin ends right after them, then exits 0", async () => {
      const ids = Array.from({ length: 50 }, (_, i) => i + 1);
      const r = await run(cmd, [], ndjson(...ids.map((i) => escape(i, `k${i}`))));
      expect(r.code, r.stderr).toBe(0);
      const got = responses(parseNdjson(r.stdout));
      expect(got.map((x) => x.id).sort((a, b) => Number(a) - Number(b))).toEqual(ids);
      for (const x of got) expect(x).toEqual(escaped(x.id, `k${String(x.id)}`));
    });

    it("answers all 50 large replies when stdin ends at once and the parent reads stdout late", async () => {
      // 50 x ~64 KB of OpenRPC document: far past the pipe's buffer, so the
      // process must wait for the parent to drain stdout before it exits.
      const s = start(cmd);
      s.child.stdout.pause();
      s.end(ndjson(...Array.from({ length: 50 }, (_, i) => request(i + 1, "rpc.discover"))));
      await sleep(300);
      expect(s.exited).toBeUndefined();
      s.child.stdout.resume();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      const got = responses(parseNdjson(s.stdout));
      expect(got.map((x) => x.id)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      for (const x of got) expect(resultOf(x)).toMatchObject({ openrpc: expect.any(String) });
    });

    it.each(FRAMINGS)("on SIGTERM with %s requests in flight, exits 0 on a frame boundary with no id answered twice", async (framing) => {
      const n = 3000;
      const s = start(cmd);
      await s.write(encode(framing, ...Array.from({ length: n }, (_, i) => escape(i + 1, `k${i + 1}`))));
      await s.until(() => s.stdout.length > 0, "a first reply");
      s.child.kill("SIGTERM");
      // More input after the signal must not matter.
      void s.write(encode(framing, escape(n + 1, "late")));
      expect(await s.waitForExit(5000), s.stderr).toMatchObject({ code: 0, signal: null });
      const got = responses(parseFrames(framing, s.stdout));
      expect(got.length).toBeGreaterThan(0);
      const seen = new Set<unknown>();
      for (const x of got) {
        expect(seen.has(x.id), `id ${String(x.id)} answered twice`).toBe(false);
        seen.add(x.id);
        expect(x).toEqual(escaped(x.id, x.id === n + 1 ? "late" : `k${String(x.id)}`));
      }
    });

    it.each(["SIGTERM", "SIGINT"] as const)("on %s while idle (stdin open, nothing sent), exits 0 promptly", async (signal) => {
      const s = start(cmd);
      // Wait until it is serving: an answered request proves the handlers are installed.
      await s.write(ndjson(escape(1, "a")));
      await s.until(() => s.stdout.length > 0, "a reply");
      await sleep(50);
      s.child.kill(signal);
      expect(await s.waitForExit(3000), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(parseNdjson(s.stdout)).toEqual([escaped(1, "a")]);
    });

    it("on SIGTERM before any input at all, exits 0 promptly", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      // Nothing on the wire says "ready" before any input. The "serving" debug
      // line comes just before the signal handlers are installed (see the
      // report), so give the process a moment past it.
      await s.until(() => s.stderr.includes('"serving"'), "the serving log line");
      await sleep(200);
      s.child.kill("SIGTERM");
      expect(await s.waitForExit(3000), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(s.stdout.length).toBe(0);
    });

    // BUG (reported): at exit, serve.ts calls log.flush(cb), which with
    // sonic-boom's default minLength 0 calls back at once without waiting for
    // an asynchronous write in flight; pino's exit hook then writes the
    // buffered records synchronously, ahead of it. Records reach stderr out of
    // order (typically the "request" record lands after "exiting"). Runs are
    // concurrent because load makes it show in most runs. Remove `.fails` once fixed.
    it("writes its log records to stderr in the order they were logged, through a SIGTERM shutdown (20 runs)", async () => {
      const runs = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const s = start(cmd, ["--log-level", "debug"]);
          await s.write(ndjson(escape(1, "a")));
          await s.until(() => s.stdout.length > 0, "a reply");
          s.child.kill("SIGTERM");
          expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
          return parseLog(s.stderr);
        }),
      );
      for (const records of runs) {
        const times = records.map((r) => Date.parse(String(r["time"])));
        expect(times.every((t) => Number.isFinite(t))).toBe(true);
        expect(times, JSON.stringify(records.map((r) => r.msg))).toEqual([...times].sort((a, b) => a - b));
      }
    });

    /** No uncaught error: no stack, no EPIPE, no error-level record, and stderr still pino JSON only. */
    const quiet = (stderr: string): void => {
      expect(stderr).not.toMatch(/EPIPE|Uncaught|\n\s+at /);
      for (const rec of parseLog(stderr)) expect(rec.level, JSON.stringify(rec)).toBeLessThan(50);
    };

    it("exits 0 quietly, without a stack trace, when the parent closes its stdout and keeps writing", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      s.child.stdout.destroy();
      for (let i = 1; i <= 100 && s.exited === undefined; i++) {
        await s.write(ndjson(escape(i, "a")));
        await sleep(20);
      }
      expect(await s.waitForExit(3000), s.stderr).toMatchObject({ code: 0, signal: null });
      quiet(s.stderr);
    });

    it("exits 0 quietly when the parent closes its stdout in the middle of a large burst of replies", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      await s.write(ndjson(...Array.from({ length: 50 }, (_, i) => request(i + 1, "rpc.discover"))));
      await s.until(() => s.stdout.length > 0, "the first bytes of the replies");
      s.child.stdout.destroy();
      await s.write(ndjson(escape(51, "more")));
      expect(await s.waitForExit(3000), s.stderr).toMatchObject({ code: 0, signal: null });
      quiet(s.stderr);
    });

    it("keeps answering when the parent closes its stderr, with debug logging on", async () => {
      const s = start(cmd, ["--log-level", "debug"]);
      s.child.stderr.destroy();
      for (let i = 1; i <= 20; i++) {
        await s.write(ndjson(escape(i, `k${i}`)));
        await sleep(10);
      }
      await s.until(() => s.stdout.includes('"/k20"'), "the 20th reply");
      s.end();
      expect(await s.waitForExit()).toMatchObject({ code: 0, signal: null });
      expect(parseNdjson(s.stdout)).toEqual(Array.from({ length: 20 }, (_, i) => escaped(i + 1, `k${i + 1}`)));
    });

    it("on SIGTERM while the parent is not reading stdout, waits until every reply is read, then exits 0", async () => {
      const s = start(cmd);
      s.child.stdout.pause();
      await s.write(ndjson(...Array.from({ length: 50 }, (_, i) => request(i + 1, "rpc.discover"))));
      await sleep(200);
      s.child.kill("SIGTERM");
      await sleep(300);
      expect(s.exited).toBeUndefined();
      s.child.stdout.resume();
      expect(await s.waitForExit(5000), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(responses(parseNdjson(s.stdout)).map((r) => r.id)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    });

    it.each(FRAMINGS)("drops a %s message cut off at EOF without any half-written reply, and exits 0", async (framing) => {
      const s = start(cmd);
      await s.write(encode(framing, escape(1, "a")));
      await s.until(() => s.stdout.length > 0, "the first reply");
      const whole = encode(framing, escape(2, "b"));
      await s.write(whole.subarray(0, whole.length - 10));
      await sleep(50);
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      expect(parseFrames(framing, s.stdout)).toEqual([escaped(1, "a")]);
    });

    it("drops an LSP header cut off at EOF, and exits 0", async () => {
      expect(await exchange(Buffer.concat([lsp(escape(1, "a")), Buffer.from("Content-Len")]), "lsp")).toEqual([escaped(1, "a")]);
    });
  });

  describe.each(FRAMINGS)("--max-message-bytes 1000, %s", (framing) => {
    // A request of exactly 5000 bytes, its id the second member so it can be read from its head.
    const big = (id: number): string => {
      const shell = (pad: string): string => `{"jsonrpc":"2.0","id":${id},"method":"parsePointer","params":{"pointer":"/${pad}"}}`;
      const body = shell("x".repeat(5000 - shell("").length));
      expect(Buffer.byteLength(body)).toBe(5000);
      return body;
    };
    const bigBatch = JSON.stringify([request(20, "parsePointer", { pointer: "/" + "y".repeat(3000) }), request(21, "stats")]);
    const expected = [
      error(7, -32003, { code: "LIMIT_EXCEEDED", limit: "maxMessageBytes", max: 1000, actual: 5000 }),
      error(null, -32600),
      escaped(8, "after"),
    ];

    it("refuses an oversized request with -32003 under its id, an oversized batch with -32600, and answers what follows", async () => {
      expect(await exchange(encode(framing, big(7), bigBatch, escape(8, "after")), framing, ["--max-message-bytes", "1000"])).toEqual(expected);
    });

    it("does the same when the oversized messages arrive in small pieces", async () => {
      const s = start(cmd, ["--max-message-bytes", "1000"]);
      const input = encode(framing, big(7), bigBatch, escape(8, "after"));
      for (let at = 0; at < input.length; at += 250) {
        await s.write(input.subarray(at, at + 250));
        await sleep(2);
      }
      await s.until(() => s.stdout.includes('"/after"'), "the reply after the oversized messages");
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0 });
      expect(parseFrames(framing, s.stdout)).toEqual(expected);
    });
  });

  describe.each(FRAMINGS)("--max-message-bytes 1000 at the boundary, %s", (framing) => {
    const sized = (id: number, bytes: number): string => {
      const shell = (pad: string): string => `{"jsonrpc":"2.0","id":${id},"method":"escapePointer","params":{"path":["${pad}"]}}`;
      return shell("x".repeat(bytes - shell("").length));
    };

    it("answers a message of exactly 1000 bytes and refuses one of 1001 with -32003", async () => {
      const frames = await exchange(encode(framing, sized(1, 1000), sized(2, 1001)), framing, ["--max-message-bytes", "1000"]);
      expect(frames).toEqual([
        result(1, { pointer: expect.stringMatching(/^\/x+$/) }),
        error(2, -32003, { code: "LIMIT_EXCEEDED", limit: "maxMessageBytes", max: 1000, actual: 1001 }),
      ]);
    });

    // BUG (reported): idFromHead in src/rpc/dispatch.ts reads at most 15 digits
    // of a numeric id, so an oversized request whose id is a 16-digit safe
    // integer (accepted everywhere else) is answered with id null and -32600:
    // its own id never gets a response. Remove `.fails` once fixed.
    it("refuses an oversized request whose id is a 16-digit safe integer with -32003 under that id", async () => {
      const id = 1234567890123456;
      const frames = await exchange(encode(framing, sized(id, 2000)), framing, ["--max-message-bytes", "1000"]);
      expect(frames).toEqual([error(id, -32003, { limit: "maxMessageBytes", max: 1000, actual: 2000 })]);
    });
  });

  // BUG (reported): NdjsonDecoder counts the \r of a \r\n terminator as
  // message bytes, so a message of exactly maxMessageBytes is refused when the
  // line ends in \r\n, which protocol/README.md §2 says is tolerated. Remove `.fails` once fixed.
  it("answers a 1000-byte NDJSON message under --max-message-bytes 1000 when its line ends in \\r\\n", async () => {
    const shell = (pad: string): string => `{"jsonrpc":"2.0","id":1,"method":"escapePointer","params":{"path":["${pad}"]}}`;
    const body = shell("x".repeat(1000 - shell("").length));
    const frames = await exchange(`${body}\r\n`, "ndjson", ["--max-message-bytes", "1000"]);
    expect(frames).toEqual([result(1, { pointer: expect.stringMatching(/^\/x+$/) })]);
  });

  describe("garbage input", () => {
    it("answers random binary junk with parse errors only, then still answers a valid request and stays alive", async () => {
      const s = start(cmd);
      await s.write(ndjson(escape(1, "first")));
      await s.until(() => s.stdout.length > 0, "the first reply");
      await s.write(Buffer.concat([junk(1, 4000), Buffer.from("\n"), Buffer.from([0, 0xff, 0x0a]), junk(2, 4000), Buffer.from("\n")]));
      await s.write(ndjson(escape(2, "second")));
      await s.until(() => s.stdout.includes('"/second"'), "the reply after the junk");
      await sleep(100);
      expect(s.exited).toBeUndefined();
      await s.write(ndjson(escape(3, "third")));
      await s.until(() => s.stdout.includes('"/third"'), "a reply after a pause");
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0, signal: null });
      const frames = parseNdjson(s.stdout);
      expect(frames[0]).toEqual(escaped(1, "first"));
      expect(frames.slice(-2)).toEqual([escaped(2, "second"), escaped(3, "third")]);
      const middle = frames.slice(1, -2).flat() as unknown[];
      expect(middle.length).toBeGreaterThan(0);
      for (const f of middle) expect([error(null, -32700), error(null, -32600)]).toContainEqual(f);
    });

    it("answers each NDJSON line of invalid UTF-8 (a bare line, \\x00\\xff, inside a JSON string) with -32700, id null", async () => {
      const input = Buffer.concat([
        Buffer.from(ndjson(escape(1, "a"))),
        Buffer.from([0x61, 0xc3, 0x28, 0x62, 0x0a]),
        Buffer.from([0x00, 0xff, 0x0a]),
        Buffer.from('{"jsonrpc":"2.0","id":5,"method":"parsePointer","params":{"pointer":"/'),
        Buffer.from([0xff, 0xfe, 0xed]),
        Buffer.from('"}}\n'),
        Buffer.from(ndjson(escape(2, "b"))),
      ]);
      expect(await exchange(input)).toEqual([escaped(1, "a"), error(null, -32700), error(null, -32700), error(null, -32700), escaped(2, "b")]);
    });

    it("answers an LSP body of invalid UTF-8 or of non-JSON with -32700, id null, and goes on", async () => {
      const bad = Buffer.from('{"jsonrpc":"2.0","id":5,"method":"parsePointer","params":{"pointer":"/\xff"}}', "latin1");
      const input = Buffer.concat([lsp(escape(1, "a")), Buffer.from(`Content-Length: ${bad.length}\r\n\r\n`), bad, lsp("not json"), lsp(escape(2, "b"))]);
      expect(await exchange(input, "lsp")).toEqual([escaped(1, "a"), error(null, -32700), error(null, -32700), escaped(2, "b")]);
    });

    const badHeaders = ["Content-Type: application/json\r\n\r\n", "Content-Length: abc\r\n\r\n"];

    it("answers an LSP header block without Content-Length, and one with Content-Length: abc, with one -32600 each, sent in one chunk", async () => {
      const input = Buffer.concat([lsp(escape(1, "a")), Buffer.from(badHeaders[0] as string), Buffer.from(badHeaders[1] as string), lsp(escape(2, "b"))]);
      expect(await exchange(input, "lsp")).toEqual([escaped(1, "a"), error(null, -32600), error(null, -32600), escaped(2, "b")]);
    });

    it("answers LSP bad header blocks with one -32600 each when every piece arrives on its own", async () => {
      const s = start(cmd);
      const pieces = [lsp(escape(1, "a")), ...badHeaders, lsp(escape(2, "b"))];
      for (const [i, p] of pieces.entries()) {
        await s.write(p);
        await s.until(() => parseLsp(s.stdout).length > i, `reply ${i + 1}`);
      }
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0 });
      expect(parseLsp(s.stdout)).toEqual([escaped(1, "a"), error(null, -32600), error(null, -32600), escaped(2, "b")]);
    });

    it("answers an LSP bad header block followed by a body with one -32600, then answers the next frame sent separately", async () => {
      const s = start(cmd);
      await s.write(lsp(escape(1, "a")));
      await s.until(() => parseLsp(s.stdout).length === 1, "the first reply");
      await s.write(`Content-Length: abc\r\n\r\n${JSON.stringify(escape(2, "lost"))}`);
      await sleep(100);
      await s.write(lsp(escape(3, "c")));
      await s.until(() => s.stdout.includes('"/c"'), "the reply to the frame after the bad one");
      await s.write(lsp(escape(4, "d")));
      await s.until(() => s.stdout.includes('"/d"'), "the reply to the next frame");
      s.end();
      expect(await s.waitForExit(), s.stderr).toMatchObject({ code: 0 });
      expect(parseLsp(s.stdout)).toEqual([escaped(1, "a"), error(null, -32600), escaped(3, "c"), escaped(4, "d")]);
    });

    it("maps errors to the right id: an error response never borrows another request's id", async () => {
      const frames = responses(await exchange(ndjson(request("x", "nope"), request(1.5, "parsePointer", { pointer: 1 }), escape(-1, "m"))));
      expect(frames.map((f) => f.id)).toEqual(["x", 1.5, -1]);
      expect(errorOf(frames[0]).code).toBe(-32601);
      expect(errorOf(frames[1]).code).toBe(-32602);
    });
  });
});
