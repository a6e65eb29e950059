import { describe, expect, it } from "vitest";
import { lsp, ndjson, parseLsp, parseNdjson } from "../../scripts/harness/frames.js";
import { errorOf, request, responses } from "../../scripts/harness/jsonrpc.js";
import { COMMANDS, start, type Command } from "../../scripts/harness/process.js";
import { error, escape, escaped, exchanger, junk } from "./wire.js";

/** Hostile input: junk bytes, invalid UTF-8, broken LSP headers; every error answered under the right id, and the process goes on. */

describe.each(COMMANDS)("$name", { timeout: 20_000 }, (cmd: Command) => {
  const exchange = exchanger(cmd);

  describe("garbage input", () => {
    it("answers random binary junk with parse errors only, then still answers a valid request and stays alive", async () => {
      const s = start(cmd);
      await s.write(ndjson(escape(1, "first")));
      await s.until(() => s.stdout.length > 0, "the first reply");
      await s.write(Buffer.concat([junk(1, 4000), Buffer.from("\n"), Buffer.from([0, 0xff, 0x0a]), junk(2, 4000), Buffer.from("\n")]));
      await s.write(ndjson(escape(2, "second")));
      await s.until(() => s.stdout.includes('"/second"'), "the reply after the junk");
      // Alive: it answers the next request too (until() fails if the process exits first).
      await s.write(ndjson(escape(3, "third")));
      await s.until(() => s.stdout.includes('"/third"'), "a reply to the next request");
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
      // The next frame is sent once the bad block has been read and answered.
      await s.until(() => parseLsp(s.stdout).length === 2, "the -32600 for the bad header block");
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
