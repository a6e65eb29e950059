import { describe, expect, it } from "vitest";
import { ndjson } from "../../scripts/harness/frames.js";
import { notification, type Response } from "../../scripts/harness/jsonrpc.js";
import { COMMANDS, run, type Command } from "../../scripts/harness/process.js";
import { error, escape, escaped, exchanger, result } from "./wire.js";

/** The JSON-RPC 2.0 specification's examples (its §7), played on our methods against the built sidecar. */

describe.each(COMMANDS)("$name", { timeout: 20_000 }, (cmd: Command) => {
  const exchange = exchanger(cmd);

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
});
