import fc from "fast-check";
import { HostileGen } from "./hostile.js";
import { SENTINELS } from "./vocabulary.js";
import { TIGHT, type FuzzStream, type StreamOptions } from "./wire.js";

/** Builds a stream from its options; the same options give the same bytes. */
export function buildStream(o: StreamOptions): FuzzStream {
  const gen = new HostileGen(fc.sample(fc.gen(), { seed: o.seed, numRuns: 1 })[0] as fc.GeneratorValue, o);
  // Whitespace before the first message, which auto mode must look past to pick the framing.
  if (gen.chance(0.3)) gen.frames.push({ bytes: Buffer.from(gen.pick(["\n", " \r\n\t", "\r\n\r\n"])), calls: [], nulls: [0, 0], certain: true, kind: "leading whitespace" });
  // Sentinels: opened with known states first, then never named again until the probes.
  for (const s of SENTINELS) {
    const [state, toolState] = [gen.cleanObject(), gen.cleanObject()];
    gen.single("sentinel", { method: "openRun", params: { threadId: s, state, toolState, snapshot: true }, thread: s, expect: "ok", frame: -1 });
    gen.follow(s, [{ op: "replace", path: "", value: state }, { op: "add", path: ["toolState"], value: toolState }]);
    gen.single("sentinel", { method: "applyOps", params: gen.params("applyOps", s), thread: s, expect: "any", frame: -1 });
  }
  const huge = Array.from({ length: o.huge }, () => gen.int(0, o.messages - 1)).sort((a, b) => a - b);
  while (gen.messages < o.messages) {
    const settled = gen.cooldown === 0 && gen.window === 0 && gen.windowBytes === 0;
    if (huge.length && gen.messages >= (huge[0] as number) && settled) {
      huge.shift();
      gen.hugeMessage();
      continue;
    }
    const kind = gen.weighted<string>([[55, "call"], [10, "wrong"], [8, "batch"], [5, "notification"], [2, "null id"], [5, "envelope"], [11, "garbage"], [o.framing === "lsp" ? 4 : 0, "broken"]]);
    if (kind === "broken" && gen.cooldown === 0) gen.brokenFrame();
    else if (kind === "call" || kind === "broken") gen.single("request", gen.valid("tracked"));
    else if (kind === "wrong") gen.single("wrong params", gen.wrong());
    else if (kind === "batch") gen.batch();
    else if (kind === "notification") gen.single("notification", gen.valid("blind"), "none");
    else if (kind === "null id") gen.single("id null", gen.valid("blind"), "null");
    else if (kind === "envelope") gen.badEnvelope();
    else gen.garbage();
  }
  // Let a broken frame play out, then a barrier that ends whatever it left open, then the probes.
  while (gen.window > 0 || gen.windowBytes > 0 || gen.cooldown > 0) gen.single("filler", gen.valid("blind"), "none");
  gen.frames.push({ bytes: Buffer.from(o.framing === "ndjson" ? "\n" : `\r\n${"x".repeat(100)}\r\n\r\n`), calls: [], nulls: o.framing === "ndjson" ? [0, 0] : [1, 1], certain: true, kind: "barrier" });
  const canary = `${"\u{1F642}".repeat(255)}c`;
  gen.threads.add(canary);
  gen.single("probe", { method: "openRun", params: { threadId: canary, state: { k: [1, "v"], "a/b": { "~": null } } }, thread: canary, expect: "ok", frame: -1 });
  for (const t of gen.threads) gen.single("probe", { method: "getState", params: { threadId: t }, thread: t, expect: "any", frame: -1 });
  gen.single("probe", { method: "stats", params: {}, expect: "ok", frame: -1 });
  gen.single("probe", { method: "escapePointer", params: { path: ["a/b", "~", 0] }, expect: "ok", frame: -1 });
  if (gen.chance(0.5)) {
    // The stream ends inside a message: it is dropped, and the process still exits 0.
    const tail = gen.text(gen.valid("blind"));
    const bytes = o.framing === "ndjson" ? tail.slice(0, gen.int(1, tail.length)) : `Content-Length: ${Buffer.byteLength(tail) + 10}\r\n\r\n${tail}`;
    gen.frames.push({ bytes: Buffer.from(bytes), calls: [], nulls: [0, 1], certain: false, kind: "tail" });
  }
  const writes: number[] = [];
  for (let left = gen.frames.reduce((a, f) => a + f.bytes.length, 0); left > 0; left -= writes[writes.length - 1] as number) {
    const [min, max] = gen.weighted<[number, number]>([[10, [1, 16]], [50, [17, 4096]], [40, [4097, 262_144]]]);
    writes.push(Math.min(left, gen.int(min, max)));
  }
  const args = [...(o.forced ? ["--framing", o.framing] : []), ...(o.tight ? TIGHT.args : [])];
  const env = { AGUI_STATE_LOG_LEVEL: gen.pick(["warn", "info", "debug", "trace"]), ...(o.tight ? TIGHT.env : {}) };
  // One stream in eight is stopped with SIGTERM or SIGINT part-way through instead of ending stdin.
  const sigterm = gen.chance(0.125) ? gen.int(10, 90) / 100 : 0;
  const signal = gen.pick(["SIGTERM", "SIGINT"] as const);
  return { ...o, args, env, sigterm, signal, frames: gen.frames, writes, sent: gen.sent, threads: [...gen.threads], messages: gen.messages };
}
