import { afterEach, describe, expect, it } from "vitest";
import { redis, startRedis } from "../../scripts/harness/redis.js";
import { createLogger } from "../../src/log.js";
import { parseId } from "../../src/resume/ids.js";
import type { RunEnd, RunLog } from "../../src/resume/log.js";
import { blocksOf } from "./logged-blocks.js";
import { MemoryLog } from "../../src/resume/memory-log.js";
import { Recorder } from "../../src/resume/recorder.js";
import { openRedisLog } from "../../src/resume/redis-log.js";
import { DEFAULT_POLICY } from "../../src/resume/credentials.js";
import type { RequestHead } from "../../src/resume/edge.js";
import { resolve, runStart } from "../../src/resume/rejoin.js";

/**
 * The opening block (protocol/README.md §16): every resumable answer starts with `id: <run>.0.<nonce>`
 * and a blank line, so a client cut before the first event holds an id. The log keeps that id with the
 * run's start, in both stores: a Last-Event-ID equal to it, in full, rejoins from the first event; any
 * other id with number 0 is refused as an unknown id is.
 */
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const KEY = Buffer.alloc(32, 7);
const AUTH = { authorization: "Bearer a" };
const CAPS = { retentionMs: 60_000, maxRunBytes: 1e9, maxTotalBytes: 1e10, maxRuns: 1e6 };
const optsOf = (log: RunLog) => ({ log, key: KEY, policy: DEFAULT_POLICY, graceMs: 0 });
/** A rejoin from `id`, as a request would ask it: the run's thread and agent path, and these headers. */
const head = (id: string, headers: Record<string, string> = AUTH): RequestHead => ({ method: "POST", path: "/agent", headers: { ...headers, "last-event-id": id } });
/** The run a rejoin from `id` is given, or undefined when it is refused. */
async function findRejoin(log: RunLog, id: string, headers?: Record<string, string>, thread = "t") {
  const found = await resolve(optsOf(log), "rejoin", head(id, headers), thread);
  return found.refused ? undefined : found;
}
const EVENTS = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"STATE_DELTA","delta":[]}\n\n: keep-alive\n\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n';

/** A run recorded as the proxy and the stream methods record one: its start filed with the opening id, then its events. */
async function recorded(log: RunLog): Promise<{ recorder: Recorder; text: string }> {
  const recorder = new Recorder(log, 0, () => {}, undefined);
  await log.begin(recorder.run, runStart(optsOf(log), { threadId: "t", request: { method: "POST", path: "/agent", headers: AUTH }, status: 200, response: {}, state: {}, messages: [], opening: recorder.opening }));
  const text = recorder.part(EVENTS) + recorder.end();
  return { recorder, text };
}

/** The block of every event a cursor from `after` reads, page by page, until the run's end. */
async function read(log: RunLog, run: string, after: number): Promise<{ blocks: string[]; end: RunEnd }> {
  const cursor = await log.open(run, after);
  const blocks: string[] = [];
  for (;;) {
    const page = await cursor.read(64 * 1024);
    if (page.end !== undefined) {
      cursor.close();
      return { blocks, end: page.end };
    }
    blocks.push(...blocksOf(page.events));
  }
}

/** The id a block starts with (stamp.ts). */
const idOf = (block: string): string => block.slice(4, block.indexOf("\n"));

describe("Recorder's opening id", () => {
  it("is `<run>.0.<nonce>`, a block with the id alone, with a nonce of its own on every run", () => {
    const log = new MemoryLog(CAPS);
    const a = new Recorder(log, 0, () => {}, undefined);
    const b = new Recorder(log, 0, () => {}, undefined);
    expect(a.opening).toMatch(/^[A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+$/);
    expect(a.opening.startsWith(`${a.run}.0.`)).toBe(true);
    expect(parseId(a.opening)).toEqual({ run: a.run, seq: 0 });
    expect(a.openingBlock).toBe(`id: ${a.opening}\n\n`);
    expect(a.opening.split(".")[2]).not.toBe(b.opening.split(".")[2]);
    // Number 0 is the opening's alone: the first event is 1, and its nonce is another.
    const first = a.part('data: {"type":"RUN_STARTED"}\n\n');
    expect(first.startsWith(`id: ${a.run}.1.`)).toBe(true);
    expect(first).not.toContain(a.opening.split(".")[2]);
    expect(a.events).toBe(1);
  });

  it("parseId takes 0 only as a number of its own, never with a leading zero", () => {
    const { run, opening } = new Recorder(new MemoryLog(CAPS), 0, () => {}, undefined);
    const nonce = opening.split(".")[2] as string;
    expect(parseId(`${run}.0.${nonce}`)).toEqual({ run, seq: 0 });
    expect(parseId(`${run}.00.${nonce}`)).toBeUndefined();
    expect(parseId(`${run}.01.${nonce}`)).toBeUndefined();
  });
});

function storeTests(name: string, test: typeof it, open: () => Promise<RunLog>): void {
  describe(`the opening id in the ${name} store`, () => {
    test("idAt(run, 0) is the opening id, kept with the run's start; a rejoin from it gets every event", async () => {
      const log = await open();
      const { recorder, text } = await recorded(log);
      expect(await log.idAt(recorder.run, 0)).toBe(recorder.opening);
      expect((await log.find(recorder.run))?.opening).toBe(recorder.opening);
      const found = await findRejoin(log, recorder.opening);
      expect(found?.after).toBe(0);
      const { blocks, end } = await read(log, recorder.run, 0);
      expect(end).toBe("finished");
      expect(blocks.join("")).toBe(text.replace(": keep-alive\n\n", ""));
      expect(blocks.map((b) => parseId(idOf(b))?.seq)).toEqual([1, 2, 3]);
    });

    test("any other id with number 0 is refused, as an unknown id is: another nonce, another run's opening, another asker", async () => {
      const log = await open();
      const { recorder } = await recorded(log);
      const other = await recorded(log);
      const [run, , nonce] = recorder.opening.split(".") as [string, string, string];
      const flipped = `${nonce.slice(0, -1)}${nonce.endsWith("A") ? "B" : "A"}`;
      expect(await findRejoin(log, `${run}.0.${flipped}`)).toBeUndefined();
      expect(await findRejoin(log, `${run}.0.${other.recorder.opening.split(".")[2] ?? ""}`)).toBeUndefined();
      expect(await findRejoin(log, recorder.opening, { authorization: "Bearer b" })).toBeUndefined();
      expect(await findRejoin(log, recorder.opening, {})).toBeUndefined();
      expect(await findRejoin(log, recorder.opening, AUTH, "t2")).toBeUndefined();
      expect(await findRejoin(log, `${run.slice(0, -1)}${run.endsWith("A") ? "B" : "A"}.0.${nonce}`)).toBeUndefined();
      // The other run's own opening is taken, for its own run.
      expect((await findRejoin(log, other.recorder.opening))?.info.run).toBe(other.recorder.run);
    });
  });
}

storeTests("memory", it, () => Promise.resolve(new MemoryLog(CAPS)));
storeTests("Redis", redis.test, async () => {
  const server = await startRedis();
  const { runLog } = await openRedisLog(server.url, CAPS, createLogger("silent"));
  closers.push(() => runLog.close());
  return runLog;
});
