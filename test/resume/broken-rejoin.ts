import { expect } from "vitest";
import type { Child } from "../../scripts/harness/process.js";

/** One server of the middleware resume tests, as expectBrokenRejoins drives it. */
export interface RejoinServer {
  /** Where runs and rejoins are posted (`<url>/agent`). */
  agent: string;
  /** Starts a run of `threadId` that stops after its first events (the test agent's pause) and stays live. */
  paused(threadId: string): Promise<Response>;
  /** A whole run of `threadId` that does not pause. */
  run(threadId: string): Promise<Response>;
  /** The server's log so far (its stderr). */
  log(): string;
  /** Waits until the log says `line` (a hang guard, never an assertion on time). */
  logged(line: RegExp, what: string): Promise<void>;
}

/**
 * A RejoinServer for the Python and Go test servers: a child process whose agent at `<url>/agent`
 * pauses under `?pause=NAME` (the thread's id here) and runs through without it.
 */
export function pausingServer(url: string, child: Child): RejoinServer {
  return {
    agent: `${url}/agent`,
    paused: (threadId) => post(`${url}/agent?pause=${threadId}`, runInput(threadId)),
    run: (threadId) => post(`${url}/agent`, runInput(threadId)),
    log: () => child.stderr,
    logged: (line, what) => child.until(() => line.test(child.stderr), what),
  };
}

const runInput = (threadId: string): string => JSON.stringify({ threadId, runId: "r1", state: {}, messages: [], tools: [], context: [], forwardedProps: {} });
const post = (url: string, body: string, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream", ...headers }, body });

/** Reads until `n` events came; returns what came. */
async function events(reader: ReadableStreamDefaultReader<Uint8Array>, n: number): Promise<string> {
  let text = "";
  while ((text.match(/\n\n/g) ?? []).length < n) {
    const chunk = await reader.read();
    if (chunk.done) throw new Error(`the answer ended early: ${text}`);
    text += new TextDecoder().decode(chunk.value);
  }
  return text;
}

/** A paused run whose client read its first two events and left; returns their ids. */
async function leftRun(s: RejoinServer, threadId: string): Promise<string[]> {
  const reader = ((await s.paused(threadId)).body as ReadableStream<Uint8Array>).getReader();
  const ids = [...(await events(reader, 2)).matchAll(/^id: (.+)$/gm)].map((m) => m[1] as string);
  await reader.cancel();
  expect(ids.length).toBeGreaterThanOrEqual(2);
  return ids;
}

/** A rejoin of the run from its first event, once it has answered with the next: it is then following the run's live tail. */
async function following(s: RejoinServer, threadId: string, id: string): Promise<ReadableStreamDefaultReader<Uint8Array>> {
  const res = await post(s.agent, runInput(threadId), { "last-event-id": id });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await events(reader, 1);
  return reader;
}

/**
 * Two rejoins whose answer ends before the run does (protocol/README.md §16), on a server whose
 * sidecar caps its run log at 1 KiB (`--log-bytes 1K`): one whose run is evicted from the log
 * mid-answer (another run fills it), which the client must see as a failed body, never a clean end,
 * and one whose client leaves mid-answer. Each must leave one line of the middleware's in the
 * server's log (`evicted`, `left`; no `left` for a server that sees its client gone only when it
 * writes to it, and the run is silent), nothing that matches `trace` (a traceback, a panic, a stack
 * trace), and a server that goes on serving.
 */
export async function expectBrokenRejoins(s: RejoinServer, lines: { evicted: RegExp; left?: RegExp }, trace: RegExp): Promise<void> {
  const rejoin = await following(s, "evicted", (await leftRun(s, "evicted"))[0] as string);
  // Another run fills the 1 KiB log: the least recently used run, the rejoined one, is evicted.
  expect(await (await s.run("filler")).text()).toContain("RUN_FINISHED");
  const rest = (async () => {
    for (;;) if ((await rejoin.read()).done) return "ended cleanly";
  })();
  await expect(rest).rejects.toThrow();
  await s.logged(lines.evicted, "the middleware's line for the evicted rejoin");

  const leaving = await following(s, "left", (await leftRun(s, "left"))[0] as string);
  await leaving.cancel();
  if (lines.left) await s.logged(lines.left, "the middleware's line for the rejoin whose client left");

  expect(s.log()).not.toMatch(trace);
  expect(s.log().split("\n").filter((l) => lines.evicted.test(l))).toHaveLength(1);
  expect(await (await s.run("after")).text()).toContain("RUN_FINISHED");
}
