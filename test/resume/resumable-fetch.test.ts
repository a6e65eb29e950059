import { HttpAgent } from "@ag-ui/client";
import { afterEach, describe, expect, it } from "vitest";
import { ResumableHttpAgent, resumableFetch, type ResumeOptions } from "../../src/web/resume/index.js";
import { after, closeServers, labelled, runOf, serve, stamped, type Script } from "./resume-server.js";

/**
 * resumableFetch (protocol/README.md §16, issue 38) over real loopback HTTP servers and Node's
 * fetch, and the real @ag-ui/client HttpAgent under ResumableHttpAgent: it rejoins only an answer
 * that announced resume, stops after `retries` rejoins in a row that bring no new event and at once
 * on a refusal, failing with the error that began them, and reads ids whatever the line ends.
 * A run that fails is read with resumableFetch alone: HttpAgent (@ag-ui/client 1.0.0, runHttpRequest)
 * rethrows a failed body from its reader's cancel() as an unhandled rejection, with or without resume.
 */
afterEach(closeServers);

const post = { method: "POST", headers: { "content-type": "application/json" }, body: "{}" };
const quick = { backoffMs: 1, maxBackoffMs: 1 } satisfies ResumeOptions;

const RUN = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n';
const END = 'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n';

/** The run of five deltas, as stamped blocks; the first answer breaks after block `cutAfter` and 20 bytes into the next. */
const blocks = stamped(runOf(5));
const cutIn = (cutAfter: number): string => blocks.slice(0, cutAfter + 1).join("") + (blocks[cutAfter + 1] ?? "").slice(0, 20);
/** A heartbeat: a comment block, which is no event. */
const PING = ": ping\n\n";

/** Runs ResumableHttpAgent (or the plain HttpAgent) to its end: its message's content. */
async function runAgent(url: string, resume: ResumeOptions | "plain"): Promise<{ content?: unknown }> {
  const config = { url, threadId: "t", initialState: {} };
  const agent = resume === "plain" ? new HttpAgent(config) : new ResumableHttpAgent({ ...config, resume });
  await agent.runAgent({ runId: "r" });
  return { content: agent.messages.find((m) => m.id === "m")?.content };
}
const ALL = "0 1 2 3 4 ";

describe("resumableFetch and ids without data", () => {
  it("a cut after the opening block alone rejoins from its id, and the body is the opening block then the rejoin's events, once each", async () => {
    const { url, asked } = await serve((n) => (n === 1 ? { body: "id: RUN.0.OPEN\n\n", cut: true } : { body: `id: RUN.1.A\n${RUN}id: RUN.2.B\n${END}` }));
    const res = await resumableFetch(quick)(url, post);
    expect(await res.text()).toBe(`id: RUN.0.OPEN\n\nid: RUN.1.A\n${RUN}id: RUN.2.B\n${END}`);
    expect(asked).toEqual([undefined, "RUN.0.OPEN"]);
  });

  it("an id field with no value leaves no id: the cut is not rejoined, and the body fails", async () => {
    const { url, asked } = await serve((n) => (n === 1 ? { body: "id: RUN.0.OPEN\n\nid\n\n", cut: true } : { body: END }));
    const res = await resumableFetch(quick)(url, post);
    await expect(res.text()).rejects.toThrow();
    expect(asked).toEqual([undefined]);
  });
});

describe("resumableFetch rejoins only an answer that announced resume (ag-ui-resumable: true)", () => {
  // A server that stamps SSE ids but has no resume: a rejoin would run the agent again (issue 38 item 8).
  const unannounced = (header?: Record<string, string>): Script => () => ({ body: cutIn(3), cut: true, announce: false, ...(header ? { headers: header } : {}) });

  it("a server that sets SSE ids without announcing sees one request when its answer is cut: the client gets the answer as it came, failing", async () => {
    const { url, asked } = await serve(unannounced());
    const res = await resumableFetch(quick)(url, post);
    await expect(res.text()).rejects.toThrow();
    expect(asked).toEqual([undefined]);
  });

  it("`ag-ui-resumable: false` announces nothing: one request", async () => {
    const { url, asked } = await serve(unannounced({ "ag-ui-resumable": "false" }));
    await expect((await resumableFetch(quick)(url, post)).text()).rejects.toThrow();
    expect(asked).toEqual([undefined]);
  });

  it("the header's name is read in any case: `AG-UI-Resumable: true` is rejoined, and the run completes", async () => {
    const { url, asked } = await serve((n, last) => (n === 1 ? { body: cutIn(3), cut: true, announce: false, headers: { "AG-UI-Resumable": "true" } } : { body: after(blocks, last) }));
    expect(await runAgent(url, quick)).toEqual({ content: ALL });
    expect(asked).toEqual([undefined, "R.3"]);
  });

  it("a rejoin answered 200 without the announcement (a server that ran it as a new request) is not spliced and not asked again: the original error, two requests", async () => {
    const { url, asked } = await serve((n) => (n === 1 ? { body: cutIn(3), cut: true } : { body: blocks.join(""), announce: false }));
    const res = await resumableFetch({ ...quick, fetch: labelled() })(url, post);
    await expect(res.text()).rejects.toThrow("cut 1");
    expect(asked).toEqual([undefined, "R.3"]);
  });
});

describe("resumableFetch knows when to stop", () => {
  // Every rejoin gets 200 and a heartbeat, and is cut again with no new event: a run that ended broken, as issue 38 item 7 saw it.
  const fruitless: Script = (n) => (n === 1 ? { body: cutIn(3), cut: true } : { body: PING, cut: true });

  it("rejoins answered 200 and cut with no new event: 1 + retries requests, all from the same id, and the body fails with the first failure's error", async () => {
    const { url, asked } = await serve(fruitless);
    const tries: { attempt: number; lastEventId: string; error: string }[] = [];
    const res = await resumableFetch({ ...quick, retries: 3, fetch: labelled(), onRetry: (t) => tries.push({ ...t, error: (t.error as Error).message }) })(url, post);
    await expect(res.text()).rejects.toThrow("cut 1");
    expect(asked).toEqual([undefined, "R.3", "R.3", "R.3"]);
    expect(tries).toEqual([1, 2, 3].map((attempt) => ({ attempt, lastEventId: "R.3", error: "cut 1" })));
  });

  it("retries defaults to 5: six requests", async () => {
    const { url, asked } = await serve(fruitless);
    await expect((await resumableFetch({ ...quick, fetch: labelled() })(url, post)).text()).rejects.toThrow("cut 1");
    expect(asked).toHaveLength(6);
  });

  it("rejoins answered 200 that end cleanly with no new event count the same: 1 + retries requests, the original error", async () => {
    const { url, asked } = await serve((n) => (n === 1 ? { body: cutIn(3), cut: true } : { body: PING }));
    await expect((await resumableFetch({ ...quick, retries: 2, fetch: labelled() })(url, post)).text()).rejects.toThrow("cut 1");
    expect(asked).toHaveLength(3);
  });

  it("a rejoin that brings a new event starts the count again: cut three times, each after one new event, with retries 2, the run completes whole", async () => {
    // The first answer breaks after RUN_STARTED and TEXT_MESSAGE_START; each rejoin brings one delta, then breaks inside the next.
    const { url, asked } = await serve((n, last) => {
      if (n === 1) return { body: cutIn(2), cut: true };
      const from = Number(last?.slice(2));
      return n <= 4 ? { body: (blocks[from + 1] ?? "") + (blocks[from + 2] ?? "").slice(0, 20), cut: true } : { body: after(blocks, last) };
    });
    expect(await runAgent(url, { ...quick, retries: 2 })).toEqual({ content: ALL });
    expect(asked).toEqual([undefined, "R.2", "R.3", "R.4", "R.5"]);
  });

  it("only rejoins in a row count: fruitless, new event, fruitless, new event, then the rest, with retries 2, completes", async () => {
    const { url, asked } = await serve((n, last) => {
      if (n === 1) return { body: cutIn(2), cut: true };
      if (n === 2 || n === 4) return { body: PING, cut: true };
      const from = Number(last?.slice(2));
      return n < 6 ? { body: blocks[from + 1] ?? "", cut: true } : { body: after(blocks, last) };
    });
    expect(await runAgent(url, { ...quick, retries: 2 })).toEqual({ content: ALL });
    expect(asked).toEqual([undefined, "R.2", "R.2", "R.3", "R.3", "R.4"]);
  });

  it("a 410 (the run is unknown, expired, not ours, or ended broken with nothing after the id) fails at once with the original error: two requests", async () => {
    const gone = JSON.stringify({ error: { code: "resume_unknown", message: "no run to resume from this Last-Event-ID" } });
    const { url, asked } = await serve((_, last) => (last === undefined ? { body: cutIn(3), cut: true } : { status: 410, body: gone }));
    const res = await resumableFetch({ ...quick, fetch: labelled() })(url, post);
    await expect(res.text()).rejects.toThrow("cut 1");
    expect(asked).toEqual([undefined, "R.3"]);
  });

  it("a 503 on the way to the run (a gateway, a server restarting) is tried again, as a rejoin with no new event", async () => {
    const { url, asked } = await serve((n, last) => (n === 1 ? { body: cutIn(3), cut: true } : n === 2 ? { status: 503, body: "" } : { body: after(blocks, last) }));
    expect(await runAgent(url, quick)).toEqual({ content: ALL });
    expect(asked).toEqual([undefined, "R.3", "R.3"]);
  });

  it("an answer that ends cleanly before its run did and whose rejoin is refused ends cleanly, as it would without resume", async () => {
    const { url, asked } = await serve((n) => (n === 1 ? { body: blocks.slice(0, 4).join("") } : { status: 410, body: "{}" }));
    expect(await (await resumableFetch(quick)(url, post)).text()).toBe(blocks.slice(0, 4).join(""));
    expect(asked).toEqual([undefined, "R.3"]);
  });
});

describe("resumableFetch sees SSE boundaries whatever the line ends (CRLF, LF, CR, mixed)", () => {
  const ends: [string, string, string][] = [
    ["CRLF", "\r\n", "\r\n"],
    ["CR", "\r", "\r"],
    ["CRLF fields, an LF blank line", "\r\n", "\n"],
    ["LF fields, a CRLF blank line", "\n", "\r\n"],
    ["CR fields, a CRLF blank line", "\r", "\r\n"],
  ];
  for (const [name, eol, blank] of ends) {
    it(`${name}: the id of the last whole event is sent, and the body is the uncut answer, byte for byte`, async () => {
      const b = stamped(runOf(5), eol, blank);
      // The first answer breaks 20 bytes into block 4; the rejoin's answer goes on from R.3.
      const { url, asked } = await serve((n, last) => (n === 1 ? { body: b.slice(0, 4).join("") + (b[4] ?? "").slice(0, 20), cut: true } : { body: after(b, last) }));
      expect(await (await resumableFetch(quick)(url, post)).text()).toBe(b.join(""));
      expect(asked).toEqual([undefined, "R.3"]);
    });
  }

  it("a CRLF blank line cut between its CR and its LF: the CR already ended the block (the SSE standard), so its id is the one rejoined from", async () => {
    const b = stamped(runOf(5), "\r\n");
    const { url, asked } = await serve((n, last) => (n === 1 ? { body: b.slice(0, 4).join("").slice(0, -1), cut: true } : { body: after(b, last) }));
    expect(await (await resumableFetch(quick)(url, post)).text()).toBe(b.join("").replace("\r\n\r\nid: R.4", "\r\n\rid: R.4"));
    expect(asked).toEqual([undefined, "R.3"]);
  });

  it("@ag-ui/client splits events on LF LF: with CRLF fields and LF blank lines, ResumableHttpAgent's cut run ends as the plain HttpAgent's uncut one", async () => {
    const b = stamped(runOf(5), "\r\n", "\n");
    const plain = await serve(() => ({ body: b.join("") }));
    expect(await runAgent(plain.url, "plain")).toEqual({ content: ALL });
    const { url, asked } = await serve((n, last) => (n === 1 ? { body: b.slice(0, 4).join("") + (b[4] ?? "").slice(0, 20), cut: true } : { body: after(b, last) }));
    expect(await runAgent(url, quick)).toEqual({ content: ALL });
    expect(asked).toEqual([undefined, "R.3"]);
  });
});
