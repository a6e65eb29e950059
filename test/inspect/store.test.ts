import { describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { Inspector, type Caps } from "../../src/inspect/store.js";
import { StreamFixer } from "../../src/stream/fixer.js";

/**
 * The inspector's memory (issue 25), fed by the real pipeline through its
 * observer hook: what each cap keeps, and what it counts.
 */

const sse = (e: unknown): string => `data: ${JSON.stringify(e)}\n\n`;

/** Runs `events` through a StreamFixer whose observer is a stream of `inspector`. */
function feed(inspector: Inspector, events: unknown[], state: JsonObject = {}) {
  const stream = inspector.open({ method: "POST", path: "/agent" }, state);
  const fixer = new StreamFixer({ state, onEvent: stream.observe });
  fixer.push(events.map(sse).join(""));
  fixer.end();
  stream.close(true);
  return stream;
}

const caps = (c: Partial<Caps>): Caps => ({ streams: 20, events: 1000, bytes: 1024 * 1024, ...c });

describe("the inspector's store", () => {
  it("records what the pipeline decided, without a finding listener of its own", () => {
    const s = feed(new Inspector(caps({})), [{ type: "RUN_STARTED", threadId: "t", runId: "r" }, { type: "STATE_DELTA", delta: [{ op: "replace", path: "/a", value: 1 }] }]);
    const d = s.detail();
    expect([d.threadId, d.runId, d.status]).toEqual(["t", "r", "complete"]);
    // The verdict on a mended delta is worked out for an observer, as for a finding listener.
    expect(d.events[1]).toMatchObject({ n: 2, type: "STATE_DELTA", delivery: "mended", forwarded: { delta: [{ op: "add", path: "/a", value: 1 }] }, state: { a: 1 } });
    expect(d.events[1]?.findings).toMatchObject([{ code: "PATH_NOT_FOUND", outcome: "mended" }]);
  });

  it("lists a finding without a kind (an op the client would have applied as sent) with its outcome, and counts it by outcome only", () => {
    // The move onto itself applies on the client as sent; the repair leaves it out all the same (§13 NOTHING_MOVED).
    const s = feed(new Inspector(caps({})), [{ type: "RUN_STARTED", threadId: "t", runId: "r" }, { type: "STATE_DELTA", delta: [{ op: "add", path: "/b", value: 2 }, { op: "move", from: "/b", path: "/b" }] }]);
    const d = s.detail();
    expect(d.events[1]).toMatchObject({ delivery: "mended", outcomes: { discarded: 1 }, forwarded: { delta: [{ op: "add", path: "/b", value: 2 }] } });
    expect(d.events[1]?.findings).toEqual([expect.objectContaining({ code: "NOTHING_MOVED", index: 1, pointer: "/b", outcome: "discarded" })]);
    expect(d.events[1]?.findings[0]).not.toHaveProperty("kind");
    expect([d.outcomes.discarded, d.kinds]).toEqual([1, { dropped: 0, ignored: 0, fatal: 0, wiped: 0 }]);
  });

  it("names what the client got for each event in the outcomes' words, and times events only when told to", () => {
    const events = [{ type: "RUN_STARTED", threadId: "t", runId: "r" }, { type: "STATE_DELTA", delta: [{ op: "replace", path: "/a", value: 1 }] }, { type: "STATE_DELTA", delta: [{ op: "remove", path: "/nothere" }] }];
    const live = feed(new Inspector(caps({})), events).detail();
    expect(live.events.map((e) => [e.delivery, typeof e.ms])).toEqual([
      ["passed", "number"],
      ["mended", "number"],
      ["discarded", "number"],
    ]);
    // A stream read from a file (check --html): the time it was read is not the stream's.
    const file = feed(new Inspector(caps({}), false), events).detail();
    expect(file.events.map((e) => e.delivery)).toEqual(["passed", "mended", "discarded"]);
    expect(file.events.filter((e) => "ms" in e)).toEqual([]);
  });

  it("keeps counting a state that outlives the event that brought it", () => {
    const big = "x".repeat(10_000);
    const s = feed(new Inspector(caps({ events: 1 })), [{ type: "RUN_STARTED", threadId: "t", runId: "r" }, { type: "STATE_SNAPSHOT", snapshot: { big } }, { type: "RUN_FINISHED", threadId: "t", runId: "r" }]);
    const d = s.detail();
    expect(d.events.map((e) => e.n)).toEqual([3]);
    expect(d.events[0]?.state).toEqual({ big });
    // RUN_FINISHED holds the snapshot's state text now: its bytes still count.
    expect(d.bytes).toBeGreaterThan(big.length);
  });

  it("stays within the byte cap, and keeps an event that alone passes it in the timeline without its text", () => {
    const s = feed(new Inspector(caps({ bytes: 4096 })), [
      { type: "RUN_STARTED", threadId: "t", runId: "r" },
      ...Array.from({ length: 20 }, (_, i) => ({ type: "STATE_DELTA", delta: [{ op: "add", path: `/k${i % 3}`, value: "y".repeat(300) }] })),
      { type: "STATE_DELTA", delta: [{ op: "add", path: "/huge", value: "z".repeat(8000) }] },
      { type: "RUN_FINISHED", threadId: "t", runId: "r" },
    ]);
    const d = s.detail();
    expect(d.bytes).toBeLessThanOrEqual(4096);
    expect(d.seen).toBe(23);
    expect(d.evicted + d.events.length).toBe(23);
    expect(d.events.at(-2)).toMatchObject({ n: 22, elided: true });
    expect(d.events.at(-2)).not.toHaveProperty("state");
    // The state the elided event made is not kept after it either: nothing holds it uncounted.
    expect(d.events.at(-1)).toMatchObject({ n: 23, type: "RUN_FINISHED" });
    expect(d.events.at(-1)).not.toHaveProperty("state");
  });

  it("drops the oldest stream past the stream cap, and that stream records nothing more", () => {
    const inspector = new Inspector(caps({ streams: 1 }));
    const first = inspector.open({ method: "POST", path: "/a" }, {});
    const second = feed(inspector, [{ type: "RUN_STARTED", threadId: "t2", runId: "r2" }]);
    first.observe({ data: '{"type":"RUN_STARTED","threadId":"t1","runId":"r1"}', out: undefined, findings: [], state: {} });
    expect(first.seen).toBe(0);
    expect(inspector.list()).toMatchObject({ dropped: 1, streams: [{ id: second.id, threadId: "t2" }] });
    expect(inspector.get(first.id)).toBeUndefined();
  });

  it("tells a listener of every change, and stops when asked", () => {
    const inspector = new Inspector(caps({}));
    const told: string[] = [];
    const stop = inspector.listen((s) => told.push(`${s.id}:${s.seen}:${s.status}`));
    feed(inspector, [{ type: "RUN_STARTED", threadId: "t", runId: "r" }, { type: "RUN_FINISHED", threadId: "t", runId: "r" }]);
    stop();
    feed(inspector, [{ type: "RUN_STARTED", threadId: "t", runId: "r" }]);
    expect(told).toEqual(["1:0:open", "1:1:open", "1:2:open", "1:2:complete"]);
  });
});
