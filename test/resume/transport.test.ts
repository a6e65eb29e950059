import { describe, expect, it } from "vitest";
import { paired, requestLine } from "../../scripts/harness/paired.js";

/**
 * Methods that answer later (protocol/README.md §16: readRejoin waits for the run's next event,
 * rejoinStream asks the run log) through the real transport, in-process: their replies leave when
 * they settle, other requests are answered meanwhile, a batch waits for all its members, and the
 * end of input still answers every request read before serving ends.
 */
type Reply = { id: number; result?: Record<string, unknown>; error?: { code: number } };

const RS = 'data: {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}\n\n';
const TM = 'data: {"type":"TEXT_MESSAGE_START","messageId":"a1","role":"assistant"}\n\n';
const resume = { threadId: "t1", path: "/agent", authorization: "Bearer s1" };

/** A paired server with one resumable stream (s1) fed RUN_STARTED, and a reload's read of it (r1) that has read everything so far. */
async function withRead() {
  const p = paired();
  p.input.write(requestLine(1, "openStream", { resume }));
  p.input.write(requestLine(2, "fixStream", { streamId: "s1", text: RS }));
  await p.lines(2);
  p.input.write(requestLine(3, "rejoinStream", { threadId: "t1", path: "/agent", authorization: "Bearer s1" }));
  await p.lines(3);
  p.input.write(requestLine(4, "readRejoin", { readId: "r1", waitMs: 0 }));
  const lines = (await p.lines(4)) as Reply[];
  expect(lines[2]?.result).toMatchObject({ readId: "r1", status: 200 });
  expect(lines[3]?.result?.["text"]).toContain("RUN_STARTED");
  return p;
}

describe("methods that answer later", () => {
  it("a waiting readRejoin is overtaken by later requests, and answered by the event that a later fixStream brings", async () => {
    const p = await withRead();
    p.input.write(requestLine(5, "readRejoin", { readId: "r1", waitMs: 30_000 }));
    p.input.write(requestLine(6, "stats", {}));
    const six = (await p.lines(5)) as Reply[];
    expect(six[4]?.id).toBe(6);
    expect(six[4]?.result).toMatchObject({ streams: 1, reads: 1, runs: 1 });
    p.input.write(requestLine(7, "fixStream", { streamId: "s1", text: TM }));
    const all = (await p.lines(7)) as Reply[];
    expect(all.slice(4).map((r) => r.id)).toEqual([6, 7, 5]);
    const fixed = all[5]?.result?.["text"] as string;
    expect(fixed).toContain("TEXT_MESSAGE_START");
    expect(all[6]?.result).toEqual({ text: fixed, done: false });
    p.input.end();
    expect(await p.server.done).toBe("end");
  });

  it("a batch with a member that answers later is one array, in order, once all have answered", async () => {
    const p = await withRead();
    p.input.write(JSON.stringify([{ jsonrpc: "2.0", id: 5, method: "rejoinStream", params: { threadId: "t1", path: "/agent", authorization: "Bearer s1" } }, { jsonrpc: "2.0", id: 6, method: "stats", params: {} }, { jsonrpc: "2.0", method: "stats" }]) + "\n");
    const lines = await p.lines(5);
    const batch = lines[4] as Reply[];
    expect(batch.map((r) => r.id)).toEqual([5, 6]);
    expect(batch[0]?.result).toMatchObject({ readId: "r2" });
    p.input.end();
    await p.server.done;
  });

  // Each read below would wait 30 s; the 15 s guard fails a transport that lets it (a hang guard, far from both).
  it("when input ends, a waiting readRejoin answers at once with what there is, before serving ends", { timeout: 15_000 }, async () => {
    const p = await withRead();
    p.input.write(requestLine(5, "readRejoin", { readId: "r1", waitMs: 30_000 }));
    p.input.end();
    expect(await p.server.done).toBe("end");
    const last = JSON.parse(p.text().trim().split("\n").pop() as string) as Reply;
    expect(last).toEqual({ jsonrpc: "2.0", id: 5, result: { text: "", done: false } });
  });

  it("stop() (SIGTERM) answers a waiting readRejoin too", { timeout: 15_000 }, async () => {
    const p = await withRead();
    p.input.write(requestLine(5, "readRejoin", { readId: "r1", waitMs: 30_000 }));
    // The request is read (and waiting) once a later one is answered.
    p.input.write(requestLine(6, "stats", {}));
    await p.lines(5);
    p.server.stop();
    expect(await p.server.done).toBe("stopped");
    expect(p.text().trim().split("\n").map((l) => (JSON.parse(l) as Reply).id)).toEqual([1, 2, 3, 4, 6, 5]);
  });
});
