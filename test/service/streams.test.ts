import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import type { CallResult } from "../../src/protocol/errors.js";
import { StreamService, type Pipeline } from "../../src/service/stream-service.js";
import { StreamFixer, type Policy } from "../../src/stream/fixer.js";
import { LOADED_PIPELINE } from "../../scripts/harness/paired.js";
import { CORPUS, cut, stream, toNdjson, toSse } from "../stream/streams.js";

/**
 * Issue 24 §1: the stream methods' service in-process, on a fake clock (no
 * wall-clock time decides a result): the parts of a stream, however cut,
 * come back as `fix` writes the whole; limits and idle streams close with
 * the reason a later call reports.
 */
const seed = process.env["FUZZ_SEED"] !== undefined ? Number(process.env["FUZZ_SEED"]) : process.env["CI"] === "true" ? 20261202 : undefined;
const runs = { numRuns: Number(process.env["FC_RUNS"] ?? 100), ...(seed !== undefined ? { seed } : {}) };

function value<T>(r: CallResult<T>): T {
  if (!r.ok) throw new Error(`failed: ${JSON.stringify(r.error)}`);
  return r.value;
}

function service(limits: { maxStreams?: number; streamIdleMs?: number } = {}, pipeline: Pipeline = LOADED_PIPELINE) {
  const clock = { t: 1000 };
  return { clock, svc: new StreamService({ limits, pipeline, now: () => clock.t }) };
}

/**
 * `agui-state fix --report` on the whole text, in-process: the reference every
 * cut is held to. With a listener, as the service has one for its counts:
 * the pipeline's output can differ without one (the order of a root move's
 * removes), which is the pipeline's to mend, not the stream methods'.
 */
function whole(text: string, state: JsonObject, policy: Policy): string {
  const f = new StreamFixer({ state: structuredClone(state), policy, onFinding: () => undefined });
  return f.push(text) + f.end();
}

const POLICIES: { name: string; params: { own?: string[]; snapshots?: "pass" | "delta"; joinKeys?: boolean }; policy: Policy }[] = [
  { name: "no flags", params: {}, policy: { own: [], snapshots: "pass", joinKeys: false } },
  { name: "--own /toolState --join-keys", params: { own: ["/toolState"], joinKeys: true }, policy: { own: [["toolState"]], snapshots: "pass", joinKeys: true } },
  { name: "--snapshots delta", params: { snapshots: "delta" }, policy: { own: [], snapshots: "delta", joinKeys: false } },
];

describe("openStream, fixStream, closeStream", () => {
  for (const { name, params, policy } of POLICIES) {
    it(`${name}: any cut of any stream gives what fix gives for the whole (SSE and NDJSON)`, () => {
      fc.assert(
        fc.property(fc.oneof(fc.constantFrom(...CORPUS), stream(false)), fc.boolean(), fc.array(fc.nat(), { maxLength: 12 }), (c, sse, at) => {
          const text = sse ? toSse(c.events) : toNdjson(c.events);
          const { svc } = service();
          const { streamId } = value(svc.openStream({ state: c.state, ...params }));
          let out = "";
          for (const part of cut(text, at)) out += value(svc.fixStream({ streamId, text: part })).text;
          out += value(svc.closeStream({ streamId })).text;
          expect(out).toBe(whole(text, c.state, policy));
        }),
        runs,
      );
    });
  }

  it("counts each part's findings by outcome, and the whole stream at close as fix --report does", () => {
    const { svc } = service();
    const { streamId } = value(svc.openStream({ framing: "ndjson" }));
    const first = value(svc.fixStream({ streamId, text: '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":1}]}\n' }));
    expect(first).toMatchObject({ passed: 0, mended: 1, discarded: 0, kept: 0 });
    expect(first.text).toContain('{"op":"add","path":"/todos","value":[]}');
    const second = value(svc.fixStream({ streamId, text: '{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/nope"}]}\n' }));
    expect(second).toEqual({ text: "", findings: [expect.objectContaining({ event: 3, index: 0, pointer: "/nope", code: "PATH_NOT_FOUND", outcome: "discarded" })], passed: 0, mended: 0, discarded: 1, kept: 0, pending: 0 });
    const closed = value(svc.closeStream({ streamId }));
    expect(closed).toEqual({ text: "", findings: [], summary: { events: 3, deltas: 2, dropped: 2, ignored: 0, fatal: 0, wiped: 0, passed: 0, mended: 1, discarded: 1, kept: 0, unfixed: 0 } });
  });

  it("a framing given wins over the first line: NDJSON told to be SSE passes as SSE text without data", () => {
    const line = '{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":1}]}\n';
    const { svc } = service();
    const sse = value(svc.openStream({ framing: "sse" })).streamId;
    const detected = value(svc.openStream({})).streamId;
    expect(value(svc.fixStream({ streamId: sse, text: line + "\n" })).text).toBe(line + "\n");
    expect(value(svc.fixStream({ streamId: detected, text: line })).text).not.toBe(line);
  });

  it("interleaved streams keep apart: each ends as it would alone", () => {
    const { svc } = service();
    const cases = CORPUS.slice(0, 8);
    const ids = cases.map((c) => value(svc.openStream({ state: c.state, own: ["/toolState"] })).streamId);
    const texts = cases.map((c) => toSse(c.events));
    const outs = cases.map(() => "");
    for (let i = 0; texts.some((t) => i < t.length); i += 7) {
      cases.forEach((_, k) => {
        const part = (texts[k] as string).slice(i, i + 7);
        if (part) outs[k] += value(svc.fixStream({ streamId: ids[k] as string, text: part })).text;
      });
    }
    cases.forEach((c, k) => {
      outs[k] += value(svc.closeStream({ streamId: ids[k] as string })).text;
      expect(outs[k], c.name).toBe(whole(texts[k] as string, c.state, { own: [["toolState"]], snapshots: "pass", joinKeys: false }));
    });
  });
});

describe("refusals and the reasons of UNKNOWN_STREAM", () => {
  it("refuses a baseline that is not an object, an own pointer that is not one or is the root, a baseline over the limits", () => {
    const { svc } = service();
    expect(svc.openStream({ state: [] })).toMatchObject({ ok: false, error: { kind: "InvalidParams", data: { field: "/state", reason: "ROOT_NOT_OBJECT" } } });
    expect(svc.openStream({ own: ["/ok", "toolState"] })).toMatchObject({ ok: false, error: { data: { field: "/own/1", reason: "INVALID_POINTER" } } });
    expect(svc.openStream({ own: [""] })).toMatchObject({ ok: false, error: { data: { field: "/own/0", reason: "INVALID_POINTER" } } });
    // issue 41: no op may name __proto__ (protocol/README.md §3), so no delta could write an owned one.
    expect(svc.openStream({ own: ["/ok", "/__proto__"] })).toMatchObject({ ok: false, error: { data: { field: "/own/1", reason: "FORBIDDEN_KEY" } } });
    expect(svc.openStream({ own: ["/constructor/prototype"] })).toMatchObject({ ok: false, error: { data: { field: "/own/0", reason: "FORBIDDEN_KEY" } } });
    const small = new StreamService({ limits: { maxStateBytes: 10 }, pipeline: LOADED_PIPELINE });
    expect(small.openStream({ state: { long: "more than ten bytes" } })).toMatchObject({ ok: false, error: { kind: "LimitExceeded", data: { limit: "maxStateBytes", max: 10 } } });
    // Nothing refused was opened.
    expect(svc.stats().streams).toBe(0);
  });

  it("never opened, closed: -32006 with the reason", () => {
    const { svc } = service();
    expect(svc.fixStream({ streamId: "s1", text: "" })).toMatchObject({ ok: false, error: { kind: "UnknownStream", data: { code: "UNKNOWN_STREAM", streamId: "s1", reason: "never opened" } } });
    const { streamId } = value(svc.openStream({}));
    value(svc.closeStream({ streamId }));
    expect(svc.closeStream({ streamId })).toMatchObject({ ok: false, error: { data: { reason: "closed" } } });
    expect(svc.fixStream({ streamId, text: "x" })).toMatchObject({ ok: false, error: { data: { reason: "closed" } } });
    // Ids are never handed out twice.
    expect(value(svc.openStream({})).streamId).not.toBe(streamId);
  });

  it("past maxStreams the least recently used stream is evicted; every call marks its stream used", () => {
    const { svc } = service({ maxStreams: 2 });
    const a = value(svc.openStream({})).streamId;
    const b = value(svc.openStream({})).streamId;
    value(svc.fixStream({ streamId: a, text: "" }));
    const c = value(svc.openStream({})).streamId;
    expect(svc.fixStream({ streamId: b, text: "" })).toMatchObject({ ok: false, error: { data: { streamId: b, reason: "evicted" } } });
    expect(value(svc.fixStream({ streamId: a, text: "" })).text).toBe("");
    expect(value(svc.fixStream({ streamId: c, text: "" })).text).toBe("");
    expect(svc.stats()).toMatchObject({ streams: 2, streamsEvicted: 1 });
  });

  it("a stream no call found for longer than streamIdleMs is closed, on the fake clock; one called in time stays", () => {
    const { svc, clock } = service({ streamIdleMs: 100 });
    const idle = value(svc.openStream({})).streamId;
    const busy = value(svc.openStream({})).streamId;
    clock.t += 60;
    value(svc.fixStream({ streamId: busy, text: "" }));
    clock.t += 40;
    // Exactly the limit: still open.
    expect(svc.stats()).toMatchObject({ streams: 2, streamsEvicted: 0 });
    clock.t += 1;
    expect(svc.stats()).toMatchObject({ streams: 1, streamsEvicted: 1 });
    expect(svc.fixStream({ streamId: idle, text: "" })).toMatchObject({ ok: false, error: { data: { streamId: idle, reason: "idle" } } });
    // busy was last found at 1060: at 1160 it is exactly at the limit, still open.
    clock.t += 59;
    expect(value(svc.closeStream({ streamId: busy })).summary.events).toBe(0);
    expect(svc.stats()).toMatchObject({ streams: 0, streamsEvicted: 1 });
  });

  it("release(owner), a shared sidecar's connection gone (protocol/README.md §2): its streams are closed, not counted as evicted; others' and unowned ones stay", () => {
    const { svc } = service();
    const [a, b] = [{}, {}];
    const ofA = [value(svc.openStream({}, a)).streamId, value(svc.openStream({}, a)).streamId];
    const ofB = value(svc.openStream({}, b)).streamId;
    const unowned = value(svc.openStream({})).streamId;
    svc.release(a);
    for (const streamId of ofA) expect(svc.fixStream({ streamId, text: "" })).toMatchObject({ ok: false, error: { data: { streamId, reason: "closed" } } });
    expect(value(svc.fixStream({ streamId: ofB, text: "" })).text).toBe("");
    expect(value(svc.fixStream({ streamId: unowned, text: "" })).text).toBe("");
    expect(svc.stats()).toMatchObject({ streams: 2, streamsEvicted: 0 });
    svc.release(a);
    expect(svc.stats()).toMatchObject({ streams: 2 });
  });

  it("streams abandoned without closeStream do not pile up: at most maxStreams stay, and idle ones go", () => {
    const { svc, clock } = service({ maxStreams: 50, streamIdleMs: 1000 });
    for (let i = 0; i < 500; i++) {
      const { streamId } = value(svc.openStream({}));
      value(svc.fixStream({ streamId, text: 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n' }));
    }
    expect(svc.stats()).toMatchObject({ streams: 50, streamsEvicted: 450 });
    clock.t += 1001;
    expect(svc.stats()).toMatchObject({ streams: 0, streamsEvicted: 500 });
  });

  it("the pipeline is loaded on the first openStream, not before, and says it is loading until it is; a part that beats it (only possible in the same batch) gets -32006 with reason loading, and the stream stays open", () => {
    let loads = 0;
    let loaded = false;
    const inFlight = Promise.resolve();
    const pipeline: Pipeline = { get: () => (loaded ? (o) => new StreamFixer(o) : undefined), load: () => void loads++, loading: () => (loads > 0 && !loaded ? inFlight : undefined) };
    const { svc } = service({}, pipeline);
    expect(loads).toBe(0);
    expect(svc.loading()).toBeUndefined();
    const early = value(svc.openStream({})).streamId;
    expect(loads).toBe(1);
    expect(svc.loading()).toBe(inFlight);
    expect(svc.fixStream({ streamId: early, text: "" })).toMatchObject({ ok: false, error: { data: { code: "UNKNOWN_STREAM", streamId: early, reason: "loading" } } });
    expect(svc.closeStream({ streamId: early })).toMatchObject({ ok: false, error: { data: { reason: "loading" } } });
    loaded = true;
    expect(svc.loading()).toBeUndefined();
    expect(value(svc.fixStream({ streamId: early, text: "" })).text).toBe("");
    expect(value(svc.closeStream({ streamId: early })).summary.events).toBe(0);
    const later = value(svc.openStream({})).streamId;
    expect(value(svc.fixStream({ streamId: later, text: "" })).text).toBe("");
  });
});
