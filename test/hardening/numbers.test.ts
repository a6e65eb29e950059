import { describe, expect, it } from "vitest";
import { startPeer } from "../../scripts/harness/peer.js";
import { crossing, openSentinel, type Err } from "./crossing.js";

/** Numbers in params (protocol/README.md §3): unsafe integers and overflowing literals refused with their path, safe ones passed through exactly. */

describe("numbers", { timeout: 20_000 }, () => {
  // Integer tokens beyond ±(2^53 - 1): those a double cannot hold, and those it can (2^53, 2^60, 10^20),
  // which JavaScript would write back as other text (issue 22).
  const BIG = ["12345678901234567890", "-9007199254740993", "9007199254740993", "-18014398509481985", "123456789012345678901234567890", "9007199254740992", "-9007199254740992", "1152921504606846976", "100000000000000000000"];
  const SAFE = ["9007199254740991", "-9007199254740991", "1234567890123456"];
  const FLOATS = ["6.02e23", "1e300", "-1.7976931348623157e308", "5e-324", "0.1", "12345678901234567890.5", "1.2345678901234567e+89", "1E21"];

  /** A call written as wire text, with `@N@` replaced by the literal. */
  const wire = (id: string, method: string, params: string): string => `{"jsonrpc":"2.0","id":"${id}","method":"${method}","params":${params}}\n`;

  it("refuses an integer literal beyond ±(2^53 - 1) anywhere in params but a baseline with -32602 UNSAFE_INTEGER naming its path, and changes nothing", async () => {
    const s = startPeer();
    await openSentinel(s);
    await s.ok("openRun", { threadId: "t", toolState: { keep: 1 } });
    const baseline: [string, string, (n: string) => string] = ["openRun", "/state/a/0/b", (n) => `{"threadId":"t","state":{"a":[{"b":${n}}]}}`];
    const places: [string, string, (n: string) => string][] = [
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
      for (const [method, field, params] of [baseline, ...places.slice(0, 3)]) {
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

  it("reads a baseline (openRun's and openStream's state) as the client's JSON.parse reads it: an integer past 2^53 is the double it holds (issue 41)", async () => {
    const s = startPeer();
    await openSentinel(s);
    for (const [i, n] of BIG.entries()) {
      // What the client holds, and writes back in its next RunAgentInput.state.
      const held = JSON.parse(n) as number;
      const opened = await crossing(s, () => s.callRaw(`b${i}`, wire(`b${i}`, "openRun", `{"threadId":"b${i}","state":{"id":${n},"ui":{"k":[${n}]}}}`)));
      expect("result" in opened, `openRun ${n}`).toBe(true);
      expect(await s.ok("getState", { threadId: `b${i}` }), n).toEqual({ version: 1, state: { id: held, ui: { k: [held] } } });
      // A stream's baseline: a snapshot that keeps the client's value sends nothing for it; one that changes it, a delta.
      const stream = await crossing(s, () => s.callRaw(`s${i}`, wire(`s${i}`, "openStream", `{"state":{"id":${n},"ui":1},"own":["/id"],"framing":"ndjson"}`)));
      const id = ("result" in stream ? (stream.result as { streamId: string }).streamId : undefined) ?? "";
      expect(id, `openStream ${n}`).not.toBe("");
      const fixed = (await s.ok("fixStream", { streamId: id, text: `{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n{"type":"STATE_SNAPSHOT","snapshot":{"id":${n}}}\n{"type":"STATE_SNAPSHOT","snapshot":{"id":7}}\n` })) as { text: string };
      expect(fixed.text.split("\n").slice(1, -1), n).toEqual([JSON.stringify({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/id", value: 7 }] })]);
      await s.ok("closeStream", { streamId: id });
    }
    // The request form reads RunAgentInput.state from the body text, as the client wrote it.
    const body = JSON.stringify({ threadId: "t", runId: "r", state: { id: 2 ** 53 } }).replace(String(2 ** 53), "9007199254740993");
    const form = (await s.ok("openStream", { request: { method: "POST", path: "/agent", headers: [["content-type", "application/json"]], body }, response: { status: 200, headers: [["content-type", "text/event-stream"]] }, own: ["/id"], resume: false })) as { streamId: string; baseline?: unknown };
    expect(form.baseline).toBeUndefined();
    const fixed = (await s.ok("fixStream", { streamId: form.streamId, text: 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"STATE_SNAPSHOT","snapshot":{"id":9007199254740993}}\n\n' })) as { text: string };
    expect(fixed.text).toBe('data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n');
  });

  it("passes safe integers and floats such as 6.02e23 and 1e300 through unchanged, end to end", async () => {
    const s = startPeer();
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
