import jsonpatch from "fast-json-patch";
import { describe, expect, it } from "vitest";
import { StateService } from "../../src/service/state-service.js";
import { discoverDocument } from "../../src/protocol/discover.js";
import { paired, requestLine } from "../../scripts/harness/paired.js";

describe("the server over paired streams, newline-delimited JSON", () => {
  it("plays the protocol/README.md §9 wire: resynchronizing add, escaped key, then silence", async () => {
    const p = paired();
    p.input.write(requestLine(1, "openRun", { threadId: "t1", toolState: { "raster-ops/dataset": "era5" } }));
    p.input.write(requestLine(2, "diffToolState", { threadId: "t1", set: { "raster-ops/bounds": [0, 0, 10, 10] } }));
    p.input.write(requestLine(3, "diffToolState", { threadId: "t1", set: { "raster-ops/bounds": [0, 0, 10, 10] } }));
    const [r1, r2, r3] = (await p.lines(3)) as { id: number; result: { delta: unknown[]; events: unknown[] } }[];
    expect(r1).toEqual({
      jsonrpc: "2.0",
      id: 1,
      result: {
        threadId: "t1",
        version: 1,
        delta: [{ op: "add", path: "/toolState", value: { "raster-ops/dataset": "era5" } }],
        events: [{ type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState", value: { "raster-ops/dataset": "era5" } }] }],
      },
    });
    expect(r2?.result.delta).toEqual([{ op: "add", path: "/toolState/raster-ops~1bounds", value: [0, 0, 10, 10] }]);
    expect(r3?.result).toEqual({ version: 2, delta: [], events: [] });
  });

  it("keeps a __proto__ key sent over the wire as plain data: one add of the whole map, which fast-json-patch applies", async () => {
    const p = paired();
    p.input.write(requestLine(1, "openRun", { threadId: "t", toolState: { a: 1 } }));
    p.input.write('{"jsonrpc":"2.0","id":2,"method":"diffToolState","params":{"threadId":"t","set":{"__proto__":{"polluted":true}}}}\n');
    p.input.write(requestLine(3, "getState", { threadId: "t", path: "/toolState" }));
    const lines = p.text.bind(p);
    await p.lines(3);
    const [, r2, r3] = lines().trim().split("\n");
    expect(r2).toContain('"delta":[{"op":"add","path":"/toolState","value":{"a":1,"__proto__":{"polluted":true}}}]');
    expect(r3).toContain('"state":{"a":1,"__proto__":{"polluted":true}}');
    expect(({} as Record<string, unknown>)["polluted"]).toBeUndefined();
    const delta = (JSON.parse(r2 as string) as { result: { delta: jsonpatch.Operation[] } }).result.delta;
    const client = jsonpatch.applyPatch(JSON.parse('{"mine":1,"toolState":{"a":1}}') as object, delta, true, false).newDocument;
    expect(JSON.stringify(client)).toBe('{"mine":1,"toolState":{"a":1,"__proto__":{"polluted":true}}}');
  });

  it("answers batches with arrays, leaves notifications out, and answers id null", async () => {
    const p = paired();
    p.input.write(JSON.stringify([{ jsonrpc: "2.0", id: "a", method: "escapePointer", params: { path: ["x/y"] } }, { jsonrpc: "2.0", method: "stats" }, { jsonrpc: "2.0", id: null, method: "parsePointer", params: { pointer: "/a" } }]) + "\n");
    p.input.write(JSON.stringify([{ jsonrpc: "2.0", method: "stats" }]) + "\n");
    p.input.write(requestLine(9, "stats"));
    const [batch, last] = (await p.lines(2)) as [unknown[], { id: number }];
    expect(batch).toEqual([
      { jsonrpc: "2.0", id: "a", result: { pointer: "/x~1y" } },
      { jsonrpc: "2.0", id: null, result: { path: ["a"] } },
    ]);
    expect(last.id).toBe(9);
  });

  it("refuses an integer beyond 2^53 with -32602 naming its path, and params nested too deep with -32003", async () => {
    const p = paired();
    p.input.write('{"jsonrpc":"2.0","id":1,"method":"normalize","params":{"ops":[{"op":"add","path":"/id","value":{"n":12345678901234567890}}]}}\n');
    let deep = "1";
    for (let i = 0; i < 10_000; i++) deep = `[${deep}]`;
    p.input.write(`{"jsonrpc":"2.0","id":2,"method":"normalize","params":{"ops":[],"state":${deep}}}\n`);
    p.input.write(requestLine(3, "stats"));
    const [a, b, c] = (await p.lines(3)) as { error?: { code: number; data: unknown }; id: number }[];
    expect(a?.error).toMatchObject({ code: -32602, data: { code: "INVALID_PARAMS", field: "/ops/0/value/n", reason: "UNSAFE_INTEGER" } });
    expect(b?.error).toMatchObject({ code: -32003, data: { code: "LIMIT_EXCEEDED", limit: "maxDepth", max: 256 } });
    expect(c?.id).toBe(3);
  });

  it("keeps floats of any size and safe integers, writes whole floats back as floats, and refuses integers beyond 2^53 - 1 (issue 22)", async () => {
    const p = paired();
    p.input.write('{"jsonrpc":"2.0","id":1,"method":"normalize","params":{"ops":[{"op":"add","path":"/a","value":[6.02e23,1e300,-1.7976931348623157e308,9007199254740991,"12345678901234567890"]}]}}\n');
    p.input.write('{"jsonrpc":"2.0","id":2,"method":"normalize","params":{"ops":[{"op":"add","path":"/a","value":[1,-9007199254740993]}]}}\n');
    p.input.write('{"jsonrpc":"2.0","id":3,"method":"normalize","params":{"ops":[{"op":"add","path":"/a","value":[9007199254740992]}]}}\n');
    p.input.write('{"jsonrpc":"2.0","id":4.0,"method":"normalize","params":{"ops":[{"op":"add","path":["a"],"value":[1.0,-0.0,1e2,1.5e3,1e-400,100000000000000000000.0,1e21,0.5,7]}]}}\n');
    await p.lines(4);
    const [a, b, c, d] = p.text().trim().split("\n").map((line) => JSON.parse(line) as { result?: { state: unknown }; error?: { data: unknown } });
    expect(a?.result?.state).toEqual({ a: [6.02e23, 1e300, -1.7976931348623157e308, 9007199254740991, "12345678901234567890"] });
    expect(b?.error?.data).toEqual({ code: "INVALID_PARAMS", field: "/ops/0/value/1", reason: "UNSAFE_INTEGER" });
    // 2^53 has an exact double, but 2^53 + 1 reads as it: no integer beyond 2^53 - 1 passes.
    expect(c?.error?.data).toEqual({ code: "INVALID_PARAMS", field: "/ops/0/value/0", reason: "UNSAFE_INTEGER" });
    // A whole number written as a float comes back as a float, the id too; 1e21 and up JavaScript writes with an exponent.
    expect(d).toHaveProperty("result");
    expect(p.text().trim().split("\n")[3]).toMatch(/^\{"jsonrpc":"2\.0","id":4\.0,"result":\{"delta":\[\{"op":"add","path":"\/a","value":\[1\.0,-0\.0,100\.0,1500\.0,0\.0,100000000000000000000\.0,1e\+21,0\.5,7\]\}\],.*"state":\{"a":\[1\.0,-0\.0,100\.0,1500\.0,0\.0,100000000000000000000\.0,1e\+21,0\.5,7\]\}/);
  });

  it("validates params against the protocol document: missing, unknown and mistyped params name the field", async () => {
    const p = paired();
    p.input.write(requestLine(1, "getState", {}));
    p.input.write(requestLine(2, "getState", { threadId: "t", extra: 1 }));
    p.input.write(requestLine(3, "applyOps", { threadId: "t", ops: "nope" }));
    p.input.write(requestLine(4, "getState", { threadId: "" }));
    const rs = (await p.lines(4)) as { error: { code: number; data: unknown } }[];
    expect(rs.map((r) => r.error.data)).toEqual([
      { code: "INVALID_PARAMS", field: "/threadId", reason: "MISSING" },
      { code: "INVALID_PARAMS", field: "/extra", reason: "UNKNOWN_PARAM" },
      { code: "INVALID_PARAMS", field: "/ops", reason: "INVALID_VALUE" },
      { code: "INVALID_PARAMS", field: "/threadId", reason: "INVALID_VALUE" },
    ]);
    expect(rs.every((r) => r.error.code === -32602)).toBe(true);
  });

  it("turns an exception inside a handler into -32603 and keeps serving", async () => {
    class Broken extends StateService {
      override getState(): never {
        throw new Error("bug");
      }
    }
    const p = paired("auto", new Broken());
    p.input.write(requestLine(1, "getState", { threadId: "t" }));
    p.input.write(requestLine(2, "escapePointer", { path: [] }));
    const [a, b] = (await p.lines(2)) as { error?: { code: number; data: unknown }; result?: unknown }[];
    expect(a?.error).toMatchObject({ code: -32603, data: { code: "INTERNAL_ERROR" } });
    expect(b?.result).toEqual({ pointer: "" });
  });

  it("returns the OpenRPC document from rpc.discover", async () => {
    const p = paired();
    p.input.write(requestLine(1, "rpc.discover"));
    const [r] = (await p.lines(1)) as { result: unknown }[];
    expect(r?.result).toEqual(discoverDocument());
  });

  it("resolves done with 'end' once input ends, after answering everything it read", async () => {
    const p = paired();
    for (let i = 1; i <= 50; i++) p.input.write(requestLine(i, "stats"));
    p.input.end();
    expect(await p.server.done).toBe("end");
    const ids = p.text().trim().split("\n").map((l) => (JSON.parse(l) as { id: number }).id);
    expect(ids).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
  });

  it("stops reading on stop() and resolves done with 'stopped'", async () => {
    const p = paired();
    p.input.write(requestLine(1, "stats"));
    await p.lines(1);
    p.server.stop();
    expect(await p.server.done).toBe("stopped");
  });

  it("counts requests with an id in stats, this one included", async () => {
    const p = paired();
    p.input.write(requestLine(1, "stats") + JSON.stringify({ jsonrpc: "2.0", method: "stats" }) + "\n" + requestLine(2, "stats"));
    const [, r] = (await p.lines(2)) as { result: { requests: number } }[];
    expect(r?.result.requests).toBe(2);
  });
});

describe("the server over paired streams, LSP framing", () => {
  const frame = (body: string) => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  it("detects Content-Length framing and replies in it, with byte lengths for multi-byte text", async () => {
    const p = paired();
    p.input.write(frame(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "escapePointer", params: { path: ["é/ü"] } })));
    p.input.end();
    await p.server.done;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, result: { pointer: "/é~1ü" } });
    expect(p.text()).toBe(frame(body));
  });

  it("answers a frame with a bad header with -32600 and then serves the next frame", async () => {
    const p = paired("lsp");
    p.input.write("Content-Length: zz\r\n\r\n{}" + frame(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "stats" })));
    p.input.end();
    await p.server.done;
    const bodies = p.text().split(/Content-Length: \d+\r\n\r\n/).filter(Boolean).map((b) => JSON.parse(b) as { id: unknown; error?: { code: number } });
    expect(bodies[0]).toMatchObject({ id: null, error: { code: -32600 } });
    expect(bodies[1]?.id).toBe(2);
  });
});
