import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { HttpAgent, type Message, type RunAgentInput } from "@ag-ui/client";
import { vi } from "vitest";
import { FIXTURES } from "../../scripts/harness/fixtures.js";
import { TestUpstream, type Seen } from "../proxy/upstream.js";

/**
 * Recorded answers of a real framework (test/fixtures/frameworks/<framework>/,
 * their README says how they were recorded), replayed to the real HttpAgent.
 * One fixture is one thread: its runs in order, each the request the client
 * sent and every byte of the answer. Every path of the tests serves a run's
 * recorded answer for the POST to the fixture's path whose RunAgentInput.runId
 * is the run's: matched by runId, not by order, so a path that calls its
 * upstream more than once per run, or a run sent twice, cannot be answered
 * with another run's bytes. The answer goes out one write per SSE event, as
 * the framework's server flushed them.
 */

export interface RecordedRun {
  request: RunAgentInput & { resume?: unknown };
  status: number;
  contentType: string;
  body: string;
}

export interface Fixture {
  graph: string;
  about: string;
  path: string;
  /** RFC 6901 pointers of the members the framework writes: the recipe's `own`. */
  own: string[];
  /** The root member the client keeps for itself. */
  clientKey: string;
  runs: RecordedRun[];
}

/** Every fixture of `framework`, by file name. */
export function loadFixtures(framework: string): Fixture[] {
  const dir = path.join(FIXTURES, "frameworks", framework);
  return readdirSync(dir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => JSON.parse(readFileSync(path.join(dir, f), "utf8")) as Fixture);
}

export const fixtureDir = (framework: string): string => path.join(FIXTURES, "frameworks", framework);

/** The answer's writes: each SSE event with the blank line that ends it (the last one as it ends). */
export function writes(body: string): string[] {
  return body.split(/(?<=\n\n)/).filter((w) => w !== "");
}

/** The run of `f` (any fixture) that a request to `urlPath` with `runId` asks for. */
export function runFor(fixtures: readonly Fixture[], urlPath: string, runId: unknown): RecordedRun | undefined {
  return fixtures.find((f) => f.path === urlPath)?.runs.find((r) => r.request.runId === runId);
}

/** What an upstream answers a run with; by default the recorded answer as it is. */
export type Answer = (run: RecordedRun, sent: RunAgentInput) => Promise<{ status: number; contentType: string; body: string | Buffer }>;
const recorded: Answer = (run) => Promise.resolve({ status: run.status, contentType: run.contentType, body: run.body });

/** The replay upstream on node:http: every fixture's path, each run's answer for its runId (404 for any other). */
export async function replayUpstream(fixtures: readonly Fixture[], answer: Answer = recorded): Promise<TestUpstream> {
  const routes = Object.fromEntries(
    fixtures.map((f) => [
      f.path,
      (seen: Seen) => {
        const sent = JSON.parse(seen.body.toString("utf8")) as RunAgentInput;
        const run = runFor(fixtures, seen.url.split("?")[0] ?? "", sent.runId);
        if (!run) return void seen.res.writeHead(404, { "content-type": "text/plain" }).end(`no recorded run ${String(sent.runId)}`);
        void answer(run, sent).then(({ status, contentType, body }) => {
          seen.res.writeHead(status, { "content-type": contentType, "cache-control": "no-cache" });
          for (const w of typeof body === "string" ? writes(body) : [body]) seen.res.write(w);
          seen.res.end();
        });
      },
    ]),
  );
  return TestUpstream.start(routes);
}

/** One run as the client lived it. */
export interface ClientRun {
  /** The RunAgentInput the client sent (its state and messages as it held them). */
  sent: RunAgentInput;
  stateAfter: unknown;
  runErrors: string[];
  rejected?: string;
  /** The answer as it came over the wire. */
  wire: string;
}

export interface Thread {
  state: unknown;
  messages: Message[];
  runs: ClientRun[];
  /** What the client (fast-json-patch among it) said on console.warn. */
  warnings: string[];
}

/**
 * The fixture's thread through `origin` (the fixture's path is added) with
 * the real HttpAgent. Before each run the client holds what it holds after
 * the last one, as a UI does, plus what the user did between the runs: the
 * recorded request's messages it lacks (the next user message) and its own
 * key as recorded (a UI writes its key itself; where the run before wiped it,
 * the UI's write puts it back). The request is then the client's own; the
 * recorded answer was recorded for the state the client holds with
 * agui-state, so where the client holds something else (LangGraph alone), the
 * answer is still the recorded one.
 */
export async function runThread(origin: string, f: Fixture): Promise<Thread> {
  const first = f.runs[0] as RecordedRun;
  const wires: Promise<string>[] = [];
  const sent: RunAgentInput[] = [];
  const teeing = async (url: string, init: RequestInit): Promise<Response> => {
    sent.push(JSON.parse(String(init.body)) as RunAgentInput);
    const res = await fetch(url, init);
    wires.push(res.clone().text());
    return res;
  };
  const agent = new HttpAgent({ url: `${origin}${f.path}`, threadId: first.request.threadId, initialState: structuredClone(first.request.state), fetch: teeing });
  const warnings: string[] = [];
  const runs: ClientRun[] = [];
  const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void warnings.push(a.map(String).join(" ").slice(0, 300)));
  // The client says a failed run on console.error; the run's RUN_ERROR and rejection are compared instead.
  const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
  try {
    for (const run of f.runs) {
      const held = new Set(agent.messages.map((m) => m.id));
      agent.addMessages(structuredClone(run.request.messages.filter((m) => !held.has(m.id))));
      const own = (run.request.state as Record<string, unknown> | undefined)?.[f.clientKey];
      if (own !== undefined && !isDeepStrictEqual((agent.state as Record<string, unknown>)[f.clientKey], own)) agent.setState({ ...(agent.state as object), [f.clientKey]: structuredClone(own) });
      const out: Omit<ClientRun, "sent" | "wire"> = { stateAfter: undefined, runErrors: [] };
      const r = run.request;
      try {
        await agent.runAgent(
          { runId: r.runId, tools: r.tools, context: r.context, forwardedProps: r.forwardedProps, ...(r.resume === undefined ? {} : { resume: r.resume as never }) },
          { onRunErrorEvent: ({ event }) => void out.runErrors.push(`${event.code ?? ""}: ${event.message}`) },
        );
      } catch (e) {
        out.rejected = e instanceof Error ? e.message : String(e);
      }
      out.stateAfter = structuredClone(agent.state);
      runs.push({ ...out, sent: sent.at(-1) as RunAgentInput, wire: (await wires.at(-1)) ?? "" });
    }
  } finally {
    warn.mockRestore();
    error.mockRestore();
  }
  return { state: structuredClone(agent.state), messages: structuredClone(agent.messages), runs, warnings };
}

/** Each fixture's thread with the framework alone (the recorded answers, nothing between): the reference. */
export async function directly(fixtures: readonly Fixture[]): Promise<Map<string, Thread>> {
  const upstream = await replayUpstream(fixtures);
  try {
    const out = new Map<string, Thread>();
    for (const f of fixtures) out.set(f.graph, await runThread(upstream.url, f));
    return out;
  } finally {
    await upstream.close();
  }
}
