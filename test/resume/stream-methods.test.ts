import { afterEach, describe, expect, it, vi } from "vitest";
import type { CallError, CallResult } from "../../src/protocol/errors.js";
import type { ResumeRun } from "../../src/protocol/types.js";
import { StreamService } from "../../src/service/stream-service.js";
import { defaultResume, LOADED_PIPELINE } from "../../scripts/harness/paired.js";

/**
 * Resume through the stream methods (protocol/README.md §16), in-process: the service a
 * middleware talks to, with the run log in memory, no transport. Grace periods run on vitest's fake
 * timers, so no result depends on the wall clock.
 */
afterEach(() => void vi.useRealTimers());

const value = <T>(r: CallResult<T>): T => {
  if (!r.ok) throw new Error(`failed: ${JSON.stringify(r.error)}`);
  return r.value;
};
const failure = <T>(r: CallResult<T>): CallError => {
  if (r.ok) throw new Error(`expected a failure, got ${JSON.stringify(r.value)}`);
  return r.error;
};

const RESUME: ResumeRun = { threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1", messages: [{ id: "m1", role: "user", content: "hi" }] };
const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;
const EVENTS = [
  { type: "RUN_STARTED", threadId: "t1", runId: "r1" },
  { type: "STATE_DELTA", delta: [{ op: "add", path: "/n", value: 1 }] },
  { type: "TEXT_MESSAGE_START", messageId: "a1", role: "assistant" },
  { type: "TEXT_MESSAGE_CONTENT", messageId: "a1", delta: "hello" },
  { type: "TEXT_MESSAGE_END", messageId: "a1" },
  { type: "RUN_FINISHED", threadId: "t1", runId: "r1" },
];

/** The SSE blocks of a text, and their ids. */
const blocks = (text: string): string[] => text.split(/(?<=\n\n)/).filter((b) => b !== "");
const idOf = (block: string): string | undefined => /^id: (.*)$/m.exec(block)?.[1];

function setup(graceMs = 30_000, limits: { maxStreams?: number } = {}) {
  const resume = defaultResume(graceMs);
  const svc = new StreamService({ limits, pipeline: LOADED_PIPELINE, resume });
  return { svc, resume };
}

/** Opens a resumable stream and feeds it `n` events; returns its id, its run and the text it gave back. */
function started(svc: StreamService, n: number, resume: ResumeRun = RESUME) {
  const { streamId, run } = value(svc.openStream({ state: { n: 0 }, resume }));
  const text = value(svc.fixStream({ streamId, text: EVENTS.slice(0, n).map(sse).join("") })).text;
  return { streamId, run, text };
}

/** Every page a read has at hand, until the run's end or until nothing more is there yet (readRejoin with waitMs 0). */
async function readAll(svc: StreamService, readId: string): Promise<{ text: string; end: string | undefined }> {
  let text = "";
  for (;;) {
    const r = value(await svc.rejoins.readRejoin({ readId, waitMs: 0 }));
    text += r.text;
    if (r.done) return { text, end: r.end };
    if (r.text === "") return { text, end: undefined };
  }
}

/** The headers every rejoin of these runs is answered with: the run's own (the default), and the announcement (§16). */
const REJOIN_HEADERS = { "content-type": "text/event-stream", "ag-ui-resumable": "true" };

describe("openStream with resume", () => {
  it("files the stream as a run: every event gets an id line first, and the text is otherwise the repaired text", () => {
    const { svc } = setup();
    const { run, text } = started(svc, 3);
    expect(run).toMatch(/^[A-Za-z0-9_-]{12}$/);
    const bs = blocks(text);
    expect(bs).toHaveLength(3);
    for (const b of bs) expect(idOf(b)).toMatch(new RegExp(`^${run}\\.\\d+\\.[A-Za-z0-9_-]{11}$`));
    // Without the id lines, what fix writes.
    const plain = new StreamService({ pipeline: LOADED_PIPELINE });
    const { streamId } = value(plain.openStream({ state: { n: 0 } }));
    expect(text.replace(/^id: .*\n/gm, "")).toBe(value(plain.fixStream({ streamId, text: EVENTS.slice(0, 3).map(sse).join("") })).text);
    expect(svc.stats()).toMatchObject({ runs: 1, runsEvicted: 0 });
    expect(svc.stats().runBytes).toBeGreaterThan(text.length - 10);
  });

  it("refuses resume on an NDJSON stream, and ignores it with no run log (--store none)", () => {
    const { svc } = setup();
    expect(failure(svc.openStream({ framing: "ndjson", resume: RESUME })).data).toEqual({ code: "INVALID_PARAMS", field: "/resume", reason: "CONFLICTING_PARAMS" });
    const none = new StreamService({ pipeline: LOADED_PIPELINE });
    const opened = value(none.openStream({ resume: RESUME }));
    expect(opened).toEqual({ streamId: "s1" });
    expect(value(none.fixStream({ streamId: "s1", text: sse(EVENTS[0] as object) })).text).not.toContain("id:");
  });
});

describe("rejoinStream and readRejoin", () => {
  it("a dropped stream reads exactly the events after its Last-Event-ID, then the live tail, then the end", async () => {
    const { svc } = setup();
    const { streamId, text } = started(svc, 3);
    const last = idOf(blocks(text)[1] as string) as string;
    const { readId, status, headers } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1", lastEventId: last }));
    expect({ readId, status, headers }).toEqual({ readId: "r1", status: 200, headers: REJOIN_HEADERS });
    const first = await readAll(svc, readId);
    expect(first).toEqual({ text: blocks(text)[2], end: undefined });
    // A read that waits is answered by the next event the stream writes.
    const waiting = svc.rejoins.readRejoin({ readId, waitMs: 30_000 });
    expect(waiting).toBeInstanceOf(Promise);
    const more = value(svc.fixStream({ streamId, text: EVENTS.slice(3, 5).map(sse).join("") })).text;
    expect(value(await waiting)).toEqual({ text: more, done: false });
    const end = value(svc.closeStream({ streamId }));
    // The last page, then the end: `done` comes once every event was handed over.
    expect(await readAll(svc, readId)).toEqual({ text: end.text, end: "finished" });
    // A done read is closed.
    expect(failure(await svc.rejoins.readRejoin({ readId })).data).toEqual({ code: "UNKNOWN_READ", readId, reason: "closed" });
  });

  it("openStream's opening block is the run's id number 0 alone; a rejoin from it reads every event, one with another nonce is refused", async () => {
    const { svc } = setup();
    const { streamId, run, opening } = value(svc.openStream({ state: { n: 0 }, resume: RESUME }));
    expect(opening).toMatch(new RegExp(`^id: ${run}\\.0\\.[A-Za-z0-9_-]+\n\n$`));
    const id = (opening as string).slice(4, -2);
    // Cut before the first event: the client holds the opening id only, and the app has written nothing yet.
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1", lastEventId: id }));
    expect(await readAll(svc, readId)).toEqual({ text: "", end: undefined });
    const text = value(svc.fixStream({ streamId, text: EVENTS.map(sse).join("") })).text + value(svc.closeStream({ streamId })).text;
    expect(await readAll(svc, readId)).toEqual({ text, end: "finished" });
    expect(blocks(text).map((b) => idOf(b)?.split(".")[1])).toEqual(["1", "2", "3", "4", "5", "6"]);
    const forged = `${id.slice(0, -1)}${id.endsWith("A") ? "B" : "A"}`;
    expect(failure(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1", lastEventId: forged })).data).toMatchObject({ code: "RESUME_UNKNOWN", status: 410 });
    // Without resume, no opening.
    expect(value(svc.openStream({ state: { n: 0 } }))).toEqual({ streamId: "s2" });
  });

  it("a reload (no lastEventId) replays the thread's latest run from RUN_STARTED, with the state and messages it began from after it", async () => {
    const { svc } = setup();
    started(svc, 1, { ...RESUME, messages: [{ id: "old", role: "user", content: "x" }] });
    const { text } = started(svc, 3);
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" }));
    const got = blocks((await readAll(svc, readId)).text);
    const sent = blocks(text);
    expect(got).toEqual([sent[0], sse({ type: "STATE_SNAPSHOT", snapshot: { n: 0 } }), sse({ type: "MESSAGES_SNAPSHOT", messages: RESUME.messages }), sent[1], sent[2]]);
  });

  it("other credentials, another thread or path, a forged, malformed or unknown id: one answer, 410 (204 for a reload)", async () => {
    const { svc } = setup();
    const { text } = started(svc, 2);
    const id = idOf(blocks(text)[0] as string) as string;
    const [run, seq] = id.split(".") as [string, string, string];
    const ask = { threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" };
    const asks = [
      { ...ask, authorization: "Bearer b", lastEventId: id },
      { threadId: "t1", path: "/agent", cookie: "s=1", lastEventId: id },
      { ...ask, threadId: "t2", lastEventId: id },
      { ...ask, path: "/other", lastEventId: id },
      { ...ask, lastEventId: `${run}.${seq}.AAAAAAAAAAA` },
      { ...ask, lastEventId: `${run}.2.${id.split(".")[2] as string}` },
      { ...ask, lastEventId: "AAAAAAAAAAAA.1.AAAAAAAAAAA" },
      { ...ask, lastEventId: "not an id" },
    ];
    for (const a of asks) {
      const e = failure(await svc.rejoins.rejoinStream(a));
      expect({ kind: e.kind, data: e.data }, JSON.stringify(a)).toMatchObject({ kind: "ResumeUnknown", data: { code: "RESUME_UNKNOWN", status: 410 } });
    }
    for (const a of [{ ...ask, authorization: "Bearer b" }, { ...ask, threadId: "t2" }, { ...ask, path: "/other" }]) {
      expect(failure(await svc.rejoins.rejoinStream(a)).data, JSON.stringify(a)).toEqual({ code: "RESUME_UNKNOWN", status: 204, headers: {}, body: "" });
    }
    // The right ask still works: the refusals above are not a broken lookup.
    expect(value(await svc.rejoins.rejoinStream({ ...ask, lastEventId: id })).status).toBe(200);
    expect(svc.stats().reads).toBe(1);
  });

  it("a second readRejoin answers the first at once; closeRejoin answers a waiting one with -32008 closed", async () => {
    const { svc } = setup();
    started(svc, 1);
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" }));
    await readAll(svc, readId);
    const first = svc.rejoins.readRejoin({ readId, waitMs: 30_000 });
    const second = svc.rejoins.readRejoin({ readId, waitMs: 30_000 });
    expect(value(await first)).toEqual({ text: "", done: false });
    expect(value(svc.rejoins.closeRejoin({ readId }))).toEqual({ closed: true });
    expect(failure(await second).data).toEqual({ code: "UNKNOWN_READ", readId, reason: "closed" });
  });

  it("reads are held to maxStreams: the least recently used one is evicted", async () => {
    const { svc } = setup(30_000, { maxStreams: 2 });
    started(svc, 1);
    const ask = { threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" };
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(value(await svc.rejoins.rejoinStream(ask)).readId);
    expect(ids).toEqual(["r1", "r2", "r3"]);
    expect(failure(await svc.rejoins.readRejoin({ readId: "r1" })).data).toEqual({ code: "UNKNOWN_READ", readId: "r1", reason: "evicted" });
    expect(svc.stats().reads).toBe(2);
  });

  it("a resumable stream the store evicts ends its run as cancelled: its readers end, broken", async () => {
    const { svc } = setup(30_000, { maxStreams: 1 });
    started(svc, 2);
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" }));
    value(svc.openStream({})); // evicts s1
    expect((await readAll(svc, readId)).end).toBe("cancelled");
  });
});

describe("detachStream", () => {
  it("keeps the run going for the grace period: text goes only to the log, then cancel once nobody read it", async () => {
    vi.useFakeTimers();
    const { svc } = setup(5000);
    const { streamId } = started(svc, 2);
    expect(value(svc.detachStream({ streamId }))).toEqual({ graceMs: 5000 });
    const r = value(svc.fixStream({ streamId, text: sse(EVENTS[2] as object) }));
    expect(r).toEqual({ text: "", findings: [], passed: 0, mended: 0, discarded: 0, kept: 0, pending: 0, cancel: false });
    await vi.advanceTimersByTimeAsync(5000);
    expect(value(svc.fixStream({ streamId, text: "" })).cancel).toBe(true);
    // The event fed while detached is in the log: a reload sees it, and the run's end as cancelled.
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" }));
    const got = await readAll(svc, readId);
    expect(got.text).toContain("TEXT_MESSAGE_START");
    expect(got.end).toBe("cancelled");
  });

  it("a run somebody reads is not cancelled when the grace period passes; it is once they leave", async () => {
    vi.useFakeTimers();
    const { svc } = setup(5000);
    const { streamId, text } = started(svc, 2);
    value(svc.detachStream({ streamId }));
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1", lastEventId: idOf(blocks(text)[1] as string) as string }));
    await vi.advanceTimersByTimeAsync(5000);
    expect(value(svc.fixStream({ streamId, text: "" })).cancel).toBe(false);
    value(svc.rejoins.closeRejoin({ readId }));
    await vi.advanceTimersByTimeAsync(5000);
    expect(value(svc.fixStream({ streamId, text: "" })).cancel).toBe(true);
  });

  it("a detached run that becomes unresumable (an event past the client's 10 MiB buffer) is to be cancelled at once", () => {
    const { svc } = setup(5000);
    const { streamId } = started(svc, 2);
    value(svc.detachStream({ streamId }));
    expect(value(svc.fixStream({ streamId, text: "data: " + "x".repeat(11 * 1024 * 1024) })).cancel).toBe(true);
  });

  it("a stream that cannot be resumed answers graceMs 0 and cancel at once; an unknown one -32006", () => {
    const { svc } = setup(5000);
    const { streamId } = value(svc.openStream({}));
    expect(value(svc.detachStream({ streamId }))).toEqual({ graceMs: 0 });
    expect(value(svc.fixStream({ streamId, text: "" })).cancel).toBe(true);
    expect(failure(svc.detachStream({ streamId: "s9" })).data).toMatchObject({ code: "UNKNOWN_STREAM", reason: "never opened" });
  });

  it("closeStream broken ends the run as cancelled, so a rejoin breaks too", async () => {
    const { svc } = setup();
    const { streamId } = started(svc, 2);
    const { readId } = value(await svc.rejoins.rejoinStream({ threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" }));
    value(svc.closeStream({ streamId, broken: true }));
    expect((await readAll(svc, readId)).end).toBe("cancelled");
  });
});
