import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Peer } from "../../scripts/harness/peer.js";
import { redis, startRedis } from "../../scripts/harness/redis.js";

/**
 * Resume through the stream methods of the real `dist/agui-state` (protocol/README.md §16), as a
 * middleware drives it: a stream opened with resume gets ids; a detached one is to be cancelled once
 * its grace passes with nobody reading; a rejoin reads exactly the events after its id and then the
 * tail, from the same sidecar (memory) or from another sidecar sharing a real redis-server; refusals
 * are one answer; a reload replays from RUN_STARTED with the prelude.
 */
const stops: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

function sidecar(args: string[] = []): Peer {
  const p = new Peer({ args });
  stops.push(() => p.kill());
  return p;
}

const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;
const EVENTS = [
  { type: "RUN_STARTED", threadId: "t1", runId: "r1" },
  { type: "STATE_DELTA", delta: [{ op: "add", path: "/n", value: 1 }] },
  { type: "TEXT_MESSAGE_START", messageId: "a1", role: "assistant" },
  { type: "TEXT_MESSAGE_CONTENT", messageId: "a1", delta: "hello" },
  { type: "TEXT_MESSAGE_END", messageId: "a1" },
  { type: "RUN_FINISHED", threadId: "t1", runId: "r1" },
].map(sse);
const RESUME = { threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1", messages: [{ id: "m1", role: "user", content: "hi" }] };
const ASK = { threadId: "t1", path: "/agent", authorization: "Bearer a", cookie: "s=1" };

const blocks = (text: string): string[] => text.split(/(?<=\n\n)/).filter((b) => b !== "");
const idOf = (block: string): string => /^id: (.*)$/m.exec(block)?.[1] ?? "";
const bare = (text: string): string => text.replace(/^id: .*\n/gm, "");

/** Reads a rejoin until it is done: its text, and how the run ended. */
async function readToEnd(p: Peer, readId: string): Promise<{ text: string; end: unknown }> {
  let text = "";
  for (;;) {
    const r = await p.ok("readRejoin", { readId, waitMs: 2000 });
    text += r["text"] as string;
    if (r["done"] === true) return { text, end: r["end"] };
  }
}

/** Reads a rejoin until its text holds `n` events. */
async function readEvents(p: Peer, readId: string, n: number): Promise<string> {
  let text = "";
  while (blocks(text).length < n) {
    const r = await p.ok("readRejoin", { readId, waitMs: 2000 });
    expect(r["done"]).toBe(false);
    text += r["text"] as string;
  }
  return text;
}

describe("resume through the sidecar's stream methods, in memory", () => {
  it("a stream opened with resume gets an id on every event; a rejoin gets exactly the events after its id, then the tail", async () => {
    const p = sidecar();
    const { streamId, run } = await p.ok("openStream", { state: { n: 0 }, resume: RESUME });
    expect(run).toMatch(/^[A-Za-z0-9_-]{12}$/);
    const sent = (await p.ok("fixStream", { streamId, text: EVENTS.slice(0, 3).join("") }))["text"] as string;
    expect(blocks(sent).map(idOf)).toEqual([expect.stringMatching(`^${run as string}\\.1\\.`), expect.stringMatching(`^${run as string}\\.2\\.`), expect.stringMatching(`^${run as string}\\.3\\.`)]);
    expect(bare(sent)).toBe(EVENTS.slice(0, 3).join(""));
    const { readId, status, headers } = await p.ok("rejoinStream", { ...ASK, lastEventId: idOf(blocks(sent)[0] as string) });
    expect({ status, headers }).toEqual({ status: 200, headers: { "content-type": "text/event-stream", "ag-ui-resumable": "true" } });
    expect(await readEvents(p, readId as string, 2)).toBe(blocks(sent).slice(1).join(""));
    const tail = (await p.ok("fixStream", { streamId, text: EVENTS.slice(3).join("") }))["text"] as string;
    const closed = await p.ok("closeStream", { streamId });
    expect(await readToEnd(p, readId as string)).toEqual({ text: tail + (closed["text"] as string), end: "finished" });
    expect(await p.ok("stats", {})).toMatchObject({ runs: 1, reads: 0, runsEvicted: 0 });
  });

  it("detached with nobody reading: fixStream says cancel once the grace (--detach-grace) has passed", async () => {
    const p = sidecar(["--detach-grace", "0.02"]);
    const { streamId } = await p.ok("openStream", { resume: RESUME });
    await p.ok("fixStream", { streamId, text: EVENTS[0] });
    expect(await p.ok("detachStream", { streamId })).toEqual({ graceMs: 20 });
    let reply = await p.ok("fixStream", { streamId, text: EVENTS[1] });
    expect(reply["text"]).toBe("");
    // The middleware calls fixStream at least every graceMs; the answer, not the clock, is asserted.
    while (reply["cancel"] === false) {
      await new Promise((r) => setTimeout(r, 10));
      reply = await p.ok("fixStream", { streamId, text: "" });
    }
    expect(reply["cancel"]).toBe(true);
    await p.ok("closeStream", { streamId });
    // The run ended as cancelled: a reload reads its events and that end.
    const { readId } = await p.ok("rejoinStream", ASK);
    expect(await readToEnd(p, readId as string)).toMatchObject({ end: "cancelled" });
  });

  it("--store none: resume is ignored, nothing can be rejoined, and detach says cancel at once", async () => {
    const p = sidecar(["--store", "none"]);
    const opened = await p.ok("openStream", { resume: RESUME });
    expect(opened).toEqual({ streamId: "s1" });
    expect(await p.ok("detachStream", { streamId: "s1" })).toEqual({ graceMs: 0 });
    expect(await p.fails("rejoinStream", ASK)).toMatchObject({ code: -32007, data: { code: "RESUME_UNKNOWN", status: 204 } });
  });
});

describe("the sidecar's resume flags", () => {
  it("a --store that is not one, or a Redis that cannot be reached: one line on stderr, nothing on stdout, exit 2", async () => {
    const bad = sidecar(["--store", "postgres://x"]);
    expect(await bad.waitForExit()).toEqual({ code: 2, signal: null });
    expect(bad.stderr).toContain("--store: expected memory, none, or redis://HOST:PORT[/DB]");
    // Port 1 on loopback: nothing listens there.
    const gone = sidecar(["--store", "redis://127.0.0.1:1/0"]);
    expect(await gone.waitForExit()).toEqual({ code: 2, signal: null });
    expect(gone.stderr).toContain("cannot use the store redis://127.0.0.1:1/0");
    expect(gone.stdoutBytes + bad.stdoutBytes).toBe(0);
  });
});

describe("resume through two sidecars sharing a real redis-server", () => {
  redis.test("a run written by one sidecar is rejoined, reloaded and refused through the other, exactly", async () => {
    // Ended by the harness's kill registry after the test.
    const store = await startRedis();
    // Both replicas key credentials by the same secret (§16), as an operator runs them; the key is never in Redis.
    const secret = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "agui-secret-")), "secret");
    fs.writeFileSync(secret, "a secret of more than thirty-two bytes, shared by replicas\n");
    const a = sidecar(["--store", store.url, "--secret-file", secret]);
    const b = sidecar(["--store", store.url, "--secret-file", secret]);
    const { streamId, run } = await a.ok("openStream", { state: { n: 0 }, resume: RESUME });
    const sent = (await a.ok("fixStream", { streamId, text: EVENTS.slice(0, 3).join("") }))["text"] as string;
    const ids = blocks(sent).map(idOf);

    // A dropped stream, rejoined through the other sidecar: exactly the events after the id, then the tail.
    const rejoin = await b.ok("rejoinStream", { ...ASK, lastEventId: ids[1] });
    expect(rejoin).toMatchObject({ readId: "r1", status: 200 });
    expect(await readEvents(b, "r1", 1)).toBe(blocks(sent)[2]);

    // A reload through the other sidecar: from RUN_STARTED, with the state and messages the run began from.
    const reload = await b.ok("rejoinStream", ASK);
    const replayed = await readEvents(b, reload["readId"] as string, 5);
    expect(blocks(replayed)).toEqual([blocks(sent)[0], sse({ type: "STATE_SNAPSHOT", snapshot: { n: 0 } }), sse({ type: "MESSAGES_SNAPSHOT", messages: RESUME.messages }), blocks(sent)[1], blocks(sent)[2]]);

    // The tail, as the first sidecar writes it, reaches both reads; the end too.
    const tail = (await a.ok("fixStream", { streamId, text: EVENTS.slice(3).join("") }))["text"] as string;
    const closed = (await a.ok("closeStream", { streamId }))["text"] as string;
    expect(await readToEnd(b, "r1")).toEqual({ text: tail + closed, end: "finished" });
    expect(await readToEnd(b, reload["readId"] as string)).toEqual({ text: tail + closed, end: "finished" });

    // Refusals, through either sidecar: one answer.
    const [r, seq, nonce] = (ids[0] as string).split(".") as [string, string, string];
    expect(r).toBe(run);
    for (const ask of [
      { ...ASK, authorization: "Bearer b", lastEventId: ids[0] },
      { threadId: "t1", path: "/agent", cookie: "s=1", lastEventId: ids[0] },
      { ...ASK, threadId: "t2", lastEventId: ids[0] },
      { ...ASK, lastEventId: `${r}.${seq}.AAAAAAAAAAA` },
      { ...ASK, lastEventId: `${r}.2.${nonce}` },
      { ...ASK, lastEventId: "AAAAAAAAAAAA.1.AAAAAAAAAAA" },
    ]) {
      for (const p of [a, b]) expect(await p.fails("rejoinStream", ask), JSON.stringify(ask)).toMatchObject({ code: -32007, data: { code: "RESUME_UNKNOWN", status: 410 } });
    }
    expect(await b.fails("rejoinStream", { ...ASK, threadId: "t2" })).toMatchObject({ code: -32007, data: { code: "RESUME_UNKNOWN", status: 204 } });
    expect(await a.ok("stats", {})).toMatchObject({ runs: 0, runsEvicted: 0 });
    // With a read open on Redis, the end of input still ends the process, 0 (its connections are closed).
    const open = await b.ok("rejoinStream", ASK);
    expect(open["readId"]).toBe("r3");
    for (const p of [a, b]) {
      p.end();
      expect(await p.waitForExit()).toEqual({ code: 0, signal: null });
    }
  });
});
