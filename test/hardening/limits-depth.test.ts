import { describe, expect, it } from "vitest";
import { startPeer } from "../../scripts/harness/peer.js";
import { chain, crossing, expectLimit, limitSkip, nested, openSentinel, type Json } from "./crossing.js";

/** --max-depth at and past its edge, for values, params and pointers (protocol/README.md §7; see test/hardening/crossing.ts). */

describe("--max-depth 8", { timeout: 20_000 }, () => {
  const MAX = 8;
  const args = ["--max-depth", String(MAX)];

  it("openRun: a state nesting exactly max is kept; one deeper is -32003 and changes nothing", async () => {
    const s = startPeer({ args });
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
    const s = startPeer({ args });
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
    const s = startPeer({ args });
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
    const s = startPeer({ args });
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

  // Regression (reported and fixed): normalize's `state` param was not held to
  // --max-depth: openRun refused a state one level past the limit with -32003,
  // but normalize took one up to two levels past it (only the params walk, at
  // maxDepth plus the envelope's levels, stopped deeper ones).
  it("normalize: a `state` one level past max is refused with -32003, as openRun's is", async () => {
    const s = startPeer({ args });
    await openSentinel(s);
    expect(await s.ok("normalize", { ops: [], state: nested(MAX) })).toEqual({ delta: [], skipped: [], state: nested(MAX) });
    expectLimit(await crossing(s, () => s.fails("normalize", { ops: [], state: nested(MAX + 1) })), "maxDepth", MAX, MAX + 1);
  });
});
