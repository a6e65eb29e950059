import { HttpAgent } from "@ag-ui/client";
import { ResumableHttpAgent } from "../../src/web/resume/index.js";

/**
 * The script of the page browser.test.ts loads in chromium, bundled for the browser by esbuild in
 * the test: the real @ag-ui/client and the resume module, as an application would ship them. It puts
 * one function on the page, `aguiRun`, which runs (or connects) an agent and answers with where the
 * client ended. What the page is told of the run as it goes (events seen, retries) is on `aguiSeen`.
 */
export interface PageRun {
  /** The agent's URL, on the page's own origin. */
  url: string;
  threadId: string;
  initialState: Record<string, unknown>;
  /** The plain HttpAgent (no resume), or ResumableHttpAgent. */
  agent: "plain" | "resumable";
  /** runAgent(), or connectAgent() (a reloaded page). */
  mode: "run" | "connect";
  /** Request headers the agent sends: a signed-in user's Authorization (a reload needs the run's credential, §16). */
  headers?: Record<string, string>;
}

export interface PageResult {
  ok: boolean;
  error?: string;
  state: unknown;
  messages: unknown;
}

export interface PageSeen {
  events: number;
  retries: number;
  /** Bytes of the agent's answers the resume module has read from the network. */
  bytes: number;
}

const seen: PageSeen = { events: 0, retries: 0, bytes: 0 };

/**
 * The browser's fetch, whose bodies count the bytes the page has read (`seen.bytes`): a stream that
 * reads from the network only when the resume module reads from it, so a byte counted is a byte the
 * page holds, which a broken connection can no longer take back.
 */
async function counting(url: string, init: RequestInit): Promise<Response> {
  const res = await fetch(url, init);
  if (!res.body) return res;
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>(
    {
      pull: async (c) => {
        const r = await reader.read();
        if (r.done) return c.close();
        seen.bytes += r.value.length;
        c.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

async function aguiRun(run: PageRun): Promise<PageResult> {
  const config = { url: run.url, threadId: run.threadId, initialState: run.initialState, ...(run.headers ? { headers: run.headers } : {}) };
  const agent = run.agent === "plain" ? new HttpAgent(config) : new ResumableHttpAgent({ ...config, fetch: counting, resume: { backoffMs: 1, onRetry: () => void seen.retries++ } });
  const subscriber = { onEvent: () => void seen.events++ };
  try {
    if (run.mode === "connect") await agent.connectAgent({}, subscriber);
    else await agent.runAgent({ runId: "r1" }, subscriber);
    return { ok: true, state: agent.state, messages: agent.messages };
  } catch (e) {
    return { ok: false, error: String(e), state: agent.state, messages: agent.messages };
  }
}

Object.assign(globalThis, { aguiRun, aguiSeen: seen });
