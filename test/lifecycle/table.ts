import { HttpAgent, type AgentSubscriber } from "@ag-ui/client";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { vi } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { readFixture } from "../../scripts/harness/fixtures.js";
import { sentDeltas, sentState } from "./deltas.js";

export { heldDeltas, sentDeltas, sentState } from "./deltas.js";

/**
 * The lifecycle table of issue 40 (test/fixtures/lifecycle/cases.json): each
 * case a stream as a real framework sends it, and what the real
 * @ag-ui/client HttpAgent must see once the path under test repaired it.
 * Three parts, each usable alone: `serveCase` (a framework on node:http that
 * sends a case's events and ends as the case says), `runCase` (HttpAgent.runAgent
 * against a URL, recording how the run ended) and `caseFailures` (the
 * lifecycle table's checks: `expect(caseFailures(c, out)).toEqual([])`). The
 * fix and proxy tests and the three middleware runners all hold a run to these
 * one set of checks; the middleware serve their own app and reuse `runCase`,
 * `caseFailures` and, for their negative control, `clientFailed`.
 */

export interface LifecycleCase {
  name: string;
  issue: string;
  end: "eof" | "reset";
  expect: { run: "finished" | "error"; errorCode?: string; mends: string[] };
  input: { threadId: string; runId: string; state: JsonObject; messages: unknown[]; tools: unknown[]; context: unknown[]; forwardedProps: JsonObject };
  events: JsonObject[];
}

export const CASES: readonly LifecycleCase[] = readFixture<{ cases: LifecycleCase[] }>("lifecycle/cases.json").cases;

/** A case's stream as SSE, one `data:` block per event, LF-framed (what frameworks send and the client reads). */
export const caseSse = (c: LifecycleCase): string => c.events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("");

export interface Served {
  url: string;
  close(): Promise<void>;
}

/**
 * A tiny "framework" on node:http: every POST is answered with `text` as
 * text/event-stream, then ended as `end` says. eof: res.end(), a clean end of
 * the chunked body. reset: once the last byte was handed to the socket, the
 * socket is destroyed without the closing chunk, as a server whose handler
 * raised mid-stream does (the client's fetch sees the body break off).
 */
export async function serveText(text: string, end: "eof" | "reset"): Promise<Served> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      // flushHeaders first, so even an empty stream is a response whose body breaks off.
      res.flushHeaders();
      res.write(text, () => {
        if (end === "eof") res.end();
        else res.destroy();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The framework of one case: its events as SSE, ended as `end` says. */
export const serveCase = (c: LifecycleCase): Promise<Served> => serveText(caseSse(c), c.end);

/** How HttpAgent's run went: what runAgent did, the run-end events its subscriber saw, and what the agent holds. */
export interface RunOutcome {
  /** The error runAgent rejected with, if it did. */
  rejected: Error | undefined;
  finished: number;
  errors: { code: string | undefined; message: string }[];
  messages: HttpAgent["messages"];
  state: unknown;
}

/**
 * Runs the real HttpAgent once against `url` with the case's RunAgentInput
 * (its threadId, runId and state), a subscriber recording every
 * onRunFinishedEvent and onRunErrorEvent. What the client prints while it
 * runs (a warning, "Agent execution failed") is silenced: the outcome is what
 * is asserted.
 */
export async function runCase(url: string, c: LifecycleCase): Promise<RunOutcome> {
  const agent = new HttpAgent({ url, threadId: c.input.threadId, initialState: structuredClone(c.input.state) });
  const out: RunOutcome = { rejected: undefined, finished: 0, errors: [], messages: [], state: undefined };
  const subscriber: AgentSubscriber = {
    onRunFinishedEvent: () => void out.finished++,
    onRunErrorEvent: ({ event }) => void out.errors.push({ code: event.code, message: event.message }),
  };
  const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
  const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
  try {
    await agent.runAgent({ runId: c.input.runId }, subscriber);
  } catch (e) {
    out.rejected = e instanceof Error ? e : new Error(String(e));
  } finally {
    warn.mockRestore();
    error.mockRestore();
  }
  out.messages = agent.messages;
  out.state = agent.state;
  return out;
}

/**
 * The lifecycle table's checks on one run, as a list of
 * what failed (empty when nothing did): a runner asserts it is empty (the repaired
 * path) or not (the negative control).
 */
export function caseFailures(c: LifecycleCase, out: RunOutcome): string[] {
  const failed: string[] = [];
  if (out.rejected) failed.push(`runAgent rejected: ${out.rejected.message}`);
  // Exactly one end, of the kind the case says: a repair that ended a run twice fails here too.
  const ended = c.expect.run === "finished" ? out.finished === 1 && out.errors.length === 0 : out.finished === 0 && out.errors.length === 1 && out.errors[0]?.code === c.expect.errorCode;
  if (!ended) failed.push(`the run ended with ${out.finished} RUN_FINISHED and errors ${JSON.stringify(out.errors.map((e) => e.code))}, not ${c.expect.run} ${c.expect.errorCode ?? ""}`);
  // Each message and tool call once, with every delta sent: a synthesized start must not make a second one.
  const sent = sentDeltas(c.events);
  for (const [id, text] of sent.text) {
    const held = out.messages.filter((m) => m.id === id).map((m) => m.content);
    if (held.length !== 1 || held[0] !== text) failed.push(`message ${id} holds ${JSON.stringify(held)}, not [${JSON.stringify(text)}]`);
  }
  const calls = out.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
  for (const [id, args] of sent.args) {
    const held = calls.filter((t) => t.id === id).map((t) => t.function.arguments);
    if (held.length !== 1 || held[0] !== args) failed.push(`tool call ${id} holds ${JSON.stringify(held)}, not [${JSON.stringify(args)}]`);
  }
  const state = sentState(c.input.state, c.events);
  if (JSON.stringify(out.state) !== JSON.stringify(state)) failed.push(`the state is ${JSON.stringify(out.state)}, not ${JSON.stringify(state)}`);
  return failed;
}

/** Whether the client failed the run as the negative control means it: runAgent rejected, or no run end (finished or error) ever came. */
export const clientFailed = (out: RunOutcome): boolean => out.rejected !== undefined || (out.finished === 0 && out.errors.length === 0);

/** One line of `check --json`: a finding (code, kind, outcome, hint) or the summary. */
export interface CheckLine {
  code?: string;
  kind?: string;
  outcome?: string;
  hint?: string;
  summary?: unknown;
}

/**
 * The codes of expect.mends `check --json` does not name as protocol/README.md §13 says: each
 * break with a hint saying what `fix --lifecycle repair` does (outcome "passed": check mends nothing).
 */
export function unnamedInCheck(c: LifecycleCase, lines: readonly CheckLine[]): string[] {
  // INCOMPLETE_STREAM is no break of verifyEvents (the client throws at no event: its run just never ends), so check,
  // which names what the client does, says nothing of it (protocol/README.md §13); fix --report names its mend.
  return c.expect.mends.filter((code) => code !== "INCOMPLETE_STREAM" && !lines.some((l) => l.code === code && (l.hint ?? "").startsWith("fix --lifecycle repair ")));
}

/** The codes of expect.mends that `fix --report` (stderr, one line a finding) does not say it mended or discarded. */
export function unnamedInReport(c: LifecycleCase, report: string): string[] {
  const said = [...report.matchAll(/(?:^|, |: )(mended|discarded): ([A-Z_]+):/gm)].map((m) => m[2]);
  return c.expect.mends.filter((code) => !said.includes(code));
}
