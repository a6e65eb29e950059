import jsonpatch from "fast-json-patch";
import { describe, expect, it } from "vitest";
import { encode, type Framing } from "../../scripts/harness/frames.js";
import { asResponse, type Response } from "../../scripts/harness/jsonrpc.js";
import { startPeer, type Peer } from "../../scripts/harness/peer.js";
import { logged, parseLog } from "../../scripts/harness/process.js";

/**
 * Faults injected into the real binary (protocol/README.md §2, shutdown): a signal in
 * the middle of a stream, stdin cut inside a message, stdout closed by the
 * parent, and a SIGKILL followed by the documented recovery
 * (test/hardening/stderr.test.ts: stderr read late or never).
 * test/process/shutdown.test.ts covers the simple cases; these push each
 * fault under load and check what is provable from outside.
 */

const FRAMINGS: readonly Framing[] = ["ndjson", "lsp"];

type Json = unknown;

/** One applyOps per id: the thread's version after request `id` is `id`, so the answers show what was applied, once, in order. */
const bump = (id: number): Record<string, unknown> => ({ jsonrpc: "2.0", id, method: "applyOps", params: { threadId: "t", ops: [{ op: "add", path: "/n", value: id }] } });

/** stderr is pino JSON lines only, with nothing at error level or above and no stack trace or uncaught-error text. */
function quiet(stderr: string): void {
  expect(stderr).not.toMatch(/EPIPE|ERR_STREAM|Uncaught|Unhandled|\n\s+at |Error:/);
  for (const rec of parseLog(stderr)) expect(rec.level, JSON.stringify(rec)).toBeLessThan(50);
}

/** Checks that the answers are exactly ids 1..k, in order, each with version == id; returns k. */
function expectPrefix(frames: unknown[]): number {
  const got = frames.map((f) => asResponse(f));
  got.forEach((r, i) => {
    expect(r.id, `answer #${i + 1}`).toBe(i + 1);
    expect("result" in r && (r.result as { version: number }).version).toBe(i + 1);
  });
  return got.length;
}

/**
 * What is provable from outside: the sidecar reads stdin as one byte stream and
 * stops reading at some point after the signal, which the parent cannot see.
 * What it read is therefore a prefix of what was written; the messages whole
 * inside that prefix are ids 1..k, and the last one may be cut. So the answers
 * must be exactly 1..k, in order, each once (and, with one applyOps per id,
 * each applied once: version == id), with k at least what was answered when
 * the signal was sent and at most what was written; and stdout must end on a
 * frame boundary.
 */
describe("SIGTERM in the middle of a continuous stream", { timeout: 20_000 }, () => {
  it.each([
    ["ndjson", "SIGTERM"],
    ["lsp", "SIGTERM"],
    ["ndjson", "SIGINT"],
  ] as const)("%s, %s: answers exactly a prefix of what was written, once each, ends on a frame boundary, exits 0", async (framing, signal) => {
    const s = startPeer({ framing });
    await s.ok("openRun", { threadId: "t", state: {} });
    s.frames.length = 0;
    let written = 0;
    let answeredAtSignal = -1;
    let signalledAt = -1;
    // The writer never stops on its own: it streams until the process is gone.
    const writer = (async () => {
      while (s.exited === undefined && !s.child.stdin.destroyed && written < 2_000_000) {
        const batch = Array.from({ length: 100 }, (_, i) => bump(written + i + 1));
        await s.write(encode(framing, ...batch));
        written += batch.length;
        if (answeredAtSignal === -1 && s.frames.length >= 3000) {
          answeredAtSignal = s.frames.length;
          signalledAt = written;
          s.child.kill(signal);
        }
      }
    })();
    const exit = await s.waitForExit(10_000);
    await writer;
    expect(exit, s.stderr).toEqual({ code: 0, signal: null });
    expect(answeredAtSignal).toBeGreaterThan(0);
    // stdout: whole frames only, and it ends on a frame boundary.
    expect(s.stdoutError).toBeUndefined();
    expect(s.stdoutPending).toBe(0);
    const k = expectPrefix(s.frames);
    // Everything answered before the signal is still there; nothing beyond what was written.
    expect(k).toBeGreaterThanOrEqual(answeredAtSignal);
    expect(k).toBeLessThanOrEqual(written);
    console.log(`${framing} ${signal}: ${answeredAtSignal} answered when signalled (${signalledAt} written), ${k} answered in all, ${written} written before the process was gone`);
    quiet(s.stderr);
    expect(parseLog(s.stderr).some((r) => r["signal"] === signal)).toBe(true);
  });
});

describe("stdin closed in the middle of a message", { timeout: 20_000 }, () => {
  const N = 500;
  /** Ways to cut a message, for each framing: the bytes of a request cut short. */
  const cuts: [Framing, string, (whole: Buffer) => Buffer][] = [
    ["ndjson", "half a line", (w) => w.subarray(0, w.length >> 1)],
    ["ndjson", "everything but the newline", (w) => w.subarray(0, w.length - 1)],
    ["ndjson", "inside a 2-byte UTF-8 character", (w) => w.subarray(0, w.indexOf(Buffer.from("é")) + 1)],
    ["lsp", "half a header", (w) => w.subarray(0, 11)],
    ["lsp", "a header without its blank line", (w) => w.subarray(0, w.indexOf(Buffer.from("\r\n")) + 2)],
    ["lsp", "a whole header and half the body", (w) => w.subarray(0, w.indexOf(Buffer.from("\r\n\r\n")) + 4 + 20)],
    ["lsp", "all of the body but its last byte", (w) => w.subarray(0, w.length - 1)],
  ];

  it.each(cuts)("%s, cut %s: the complete requests are answered once, the cut one is not, nothing half-written, exit 0", async (framing, _, cut) => {
    const s = startPeer({ framing });
    await s.ok("openRun", { threadId: "t", state: {} });
    s.frames.length = 0;
    const complete = encode(framing, ...Array.from({ length: N }, (_, i) => bump(i + 1)));
    const last = encode(framing, { ...bump(N + 1), params: { threadId: "t", ops: [{ op: "add", path: "/é", value: "é".repeat(50) }] } });
    // Everything in one write, the cut message last, then the end of input.
    await s.write(Buffer.concat([complete, cut(last)]));
    s.end();
    expect(await s.waitForExit(), s.stderr).toEqual({ code: 0, signal: null });
    expect(s.stdoutError).toBeUndefined();
    expect(s.stdoutPending).toBe(0);
    expect(expectPrefix(s.frames)).toBe(N);
    expect(s.orphans).toEqual([]);
    quiet(s.stderr);
  });

  it("also when the input ends while the replies are still backed up behind a parent that reads slowly", async () => {
    const s = startPeer({ args: ["--log-level", "debug"] });
    s.child.stdout.pause();
    const n = 40;
    const discover = Array.from({ length: n }, (_, i) => ({ jsonrpc: "2.0", id: i + 1, method: "rpc.discover" }));
    const whole = encode("ndjson", ...discover, { jsonrpc: "2.0", id: n + 1, method: "rpc.discover" });
    await s.write(whole.subarray(0, whole.length - 5));
    s.end();
    // Every complete request handled and the cut one seen dropped, with ~2.5 MB of replies unread:
    // only a read can let it finish, so it must not have decided to exit yet.
    await s.until(() => logged(s.stderr, "input ended in the middle of a message; it was dropped") === 1, "the record of the dropped message");
    expect(logged(s.stderr, "request")).toBe(n);
    expect(logged(s.stderr, "exiting")).toBe(0);
    const unread = s.stderr.length;
    s.child.stdout.resume();
    expect(await s.waitForExit(), s.stderr).toEqual({ code: 0, signal: null });
    expect(s.stdoutError).toBeUndefined();
    expect(s.stdoutPending).toBe(0);
    expect(s.frames.map((f) => asResponse(f).id)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(logged(s.stderr.slice(unread), "exiting")).toBe(1);
    quiet(s.stderr);
  });
});

describe("stdout closed by the parent (EPIPE)", { timeout: 20_000 }, () => {
  it.each(
    FRAMINGS.flatMap((framing) => [
      [framing, "info", "while the replies are backed up"],
      [framing, "debug", "while the replies are backed up"],
      [framing, "debug", "while they stream out"],
    ] as const),
  )("%s at --log-level %s, %s: exits 0 quietly, because its output closed, while a burst of large replies is being written", async (framing, level, when) => {
    const s = startPeer({ framing, args: ["--log-level", level] });
    const burst = (from: number): Buffer => encode(framing, ...Array.from({ length: 100 }, (_, i) => ({ jsonrpc: "2.0", id: from + i, method: "rpc.discover" })));
    const backedUp = when === "while the replies are backed up";
    if (backedUp) s.child.stdout.pause();
    await s.write(burst(1));
    // Backed up: Node has stopped reading (its buffer is full), so the rest waits in the pipe and the process.
    await s.until(() => (backedUp ? s.child.stdout.readableLength >= s.child.stdout.readableHighWaterMark : s.stdoutBytes > 0), "the first bytes of the replies");
    s.child.stdout.destroy();
    // More input keeps coming after stdout is gone; stdin is never ended.
    for (let i = 1; i <= 5 && s.exited === undefined; i++) await s.write(burst(100 * i + 1));
    expect(await s.waitForExit(), s.stderr).toEqual({ code: 0, signal: null });
    quiet(s.stderr);
    // It exited on its own with its input still open: the closed output is what ended it.
    expect(s.child.stdin.writableEnded).toBe(false);
    if (level === "debug") expect(parseLog(s.stderr).filter((r) => r.msg === "exiting")).toEqual([expect.objectContaining({ why: "output-closed" })]);
  });
});

describe("a crash of the sidecar, then the documented recovery", { timeout: 20_000 }, () => {
  type Event = { type: "STATE_SNAPSHOT"; snapshot: Json } | { type: "STATE_DELTA"; delta: jsonpatch.Operation[] };

  /** What @ag-ui/client does with the events: a snapshot replaces, a delta is applied strictly, or the whole delta is dropped. */
  function applyEvents(state: Json, events: Event[]): Json {
    let out = state;
    for (const e of events) {
      if (e.type === "STATE_SNAPSHOT") out = structuredClone(e.snapshot);
      else out = jsonpatch.applyPatch(out as object, e.delta, true, false).newDocument;
    }
    return out;
  }

  it("kill -9 mid-session: pending and later calls fail naming the signal; restart + openRun(client state, stored map) puts the client on the server's state, and the replay since then equals getState", async () => {
    const own = { selectedLayer: "era5", ui: { panel: "open", "a/b": [1, 2] } };
    // The agent server's own store of the thread's tool state, and the browser's state.
    const stored: Record<string, Json> = { "raster-ops/dataset": "era5" };
    let client: Json = structuredClone(own);

    const change = async (s: Peer, set: Record<string, Json>, remove: string[] = []): Promise<void> => {
      Object.assign(stored, structuredClone(set));
      for (const k of remove) delete stored[k];
      const r = await s.ok("diffToolState", { threadId: "t1", set, remove });
      client = applyEvents(client, r["events"] as Event[]);
    };

    let s = startPeer();
    const open1 = await s.ok("openRun", { threadId: "t1", state: client, toolState: stored });
    client = applyEvents(client, open1["events"] as Event[]);
    await change(s, { "raster-ops/bounds": [0, 0, 10, 10] });
    await change(s, { "a~b": { deep: { x: 1 } }, "raster-ops/bounds": [0, 0, 20, 20] });
    await change(s, {}, ["raster-ops/dataset"]);
    expect(client).toEqual({ ...own, toolState: stored });

    // The server updates its store and calls, and the sidecar is killed with the calls in flight.
    const inflight: Promise<Response>[] = [];
    for (let i = 0; i < 20; i++) {
      const set = { [`k${i}`]: i, "raster-ops/bounds": [i, i, 10 + i, 10 + i] };
      Object.assign(stored, set);
      inflight.push(s.call("diffToolState", { threadId: "t1", set }));
    }
    s.kill("SIGKILL");
    const settled = await Promise.allSettled(inflight);
    expect(await s.waitForExit()).toEqual({ code: null, signal: "SIGKILL" });
    // The client got the events of the calls answered before the kill, and no others.
    for (const o of settled) {
      if (o.status === "fulfilled") client = applyEvents(client, (o.value as { result: { events: Event[] } }).result.events);
      else expect(String(o.reason)).toMatch(/SIGKILL/);
    }
    const lost = settled.filter((o) => o.status === "rejected").length;
    // A later call fails at once, naming the exit.
    await expect(s.call("getState", { threadId: "t1" })).rejects.toThrow(/SIGKILL/);
    console.log(`crash: ${settled.length - lost} of 20 in-flight calls answered before SIGKILL, ${lost} failed`);

    // Recovery: restart, openRun with the client's state and the stored map.
    s = startPeer();
    const atRestart = structuredClone(client);
    const events: Event[] = [];
    const record = (r: Record<string, unknown>): void => {
      events.push(...(r["events"] as Event[]));
      client = applyEvents(client, r["events"] as Event[]);
    };
    const reopen = await s.ok("openRun", { threadId: "t1", state: client, toolState: stored });
    expect(reopen["events"]).toEqual([{ type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState", value: stored }] }]);
    record(reopen);
    expect(client).toEqual({ ...own, toolState: stored });
    // The session goes on.
    for (const [set, remove] of [
      [{ "raster-ops/dataset": "gfs", k0: "zero" }, []],
      [{}, ["k1", "k2", "never-there"]],
      [{ "m~n/o": { p: [null, true, 1.5] } }, ["raster-ops/bounds"]],
      [{ k3: 3 }, []],
    ] as [Record<string, Json>, string[]][]) {
      Object.assign(stored, structuredClone(set));
      for (const k of remove) delete stored[k];
      record(await s.ok("diffToolState", { threadId: "t1", set, remove }));
    }
    const server = (await s.ok("getState", { threadId: "t1" }))["state"];
    // The replay of every event since the restart, from the client's state at the restart, lands on getState.
    expect(applyEvents(atRestart, events)).toEqual(server);
    expect(server).toEqual({ ...own, toolState: stored });
    expect(client).toEqual(server);
  });
});
