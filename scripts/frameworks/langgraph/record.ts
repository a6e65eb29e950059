/**
 * Records real LangGraph answers as fixtures: test/fixtures/frameworks/langgraph/<graph>.json.
 *
 *   npx tsx scripts/frameworks/langgraph/record.ts --python PYTHON [--only GRAPH]...
 *
 * PYTHON is an interpreter with langgraph, langchain-core, fastapi, uvicorn,
 * ag_ui and ag_ui_langgraph installed (docs/contributing.md, "Recording
 * framework fixtures"). It serves server.py; the real @ag-ui/client HttpAgent
 * runs each graph's thread twice against it, through a fetch that keeps the
 * request body exactly as HttpAgent sent it and every byte of the answer.
 *
 * Run 2 sends what the client holds after run 1 with agui-state in front:
 * LangGraph's state as HttpAgent ends run 1, plus the client's own `ui` member
 * at its value, which agui-state keeps and LangGraph alone wipes (its
 * STATE_SNAPSHOT carries only the graph's own keys; AG-UI's STATE_SNAPSHOT
 * replaces the client's whole state).
 */
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { HttpAgent } from "@ag-ui/client";
import { freePort } from "../../harness/ports.js";
import { CLIENT_KEY, CLIENT_UI, SPECS, type GraphSpec } from "./specs.js";

const HERE = path.dirname(new URL(import.meta.url).pathname);
const OUT = path.join(HERE, "../../../test/fixtures/frameworks/langgraph");

interface RecordedRun {
  request: unknown;
  status: number;
  contentType: string;
  body: string;
  /** False when the server broke the connection off instead of ending the body (a graph that raised). */
  complete: boolean;
}

interface Exchange {
  run: RecordedRun;
  /** The answer read to its end: false when the server broke the connection off. */
  read: Promise<boolean>;
}

/**
 * A fetch for HttpAgent's `fetch` option: the request goes out unchanged, the
 * answer's body is teed, one branch to HttpAgent and one read whole here.
 * The body is decoded as UTF-8 with `fatal`, so a fixture never holds a
 * replacement character LangGraph did not send.
 */
function recordingFetch(exchanges: Exchange[]): (url: string, init: RequestInit) => Promise<Response> {
  return async (url, init) => {
    const text = String(init.body);
    const request: unknown = JSON.parse(text);
    // The fixture keeps the request as JSON; replaying JSON.stringify(request) must send these bytes.
    if (JSON.stringify(request) !== text) throw new Error("the request body does not round-trip through JSON");
    const res = await fetch(url, init);
    if (!res.body) throw new Error(`${url}: an answer without a body`);
    const [mine, theirs] = res.body.tee();
    const run: RecordedRun = { request, status: res.status, contentType: res.headers.get("content-type") ?? "", body: "", complete: false };
    const read = (async (): Promise<boolean> => {
      const chunks: Uint8Array[] = [];
      const reader = mine.getReader();
      let whole = true;
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          chunks.push(value);
        }
      } catch {
        whole = false;
      }
      run.body = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
      run.complete = whole;
      return whole;
    })();
    exchanges.push({ run, read });
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** RFC 6901 §3: `~` is written `~0` and `/` is written `~1`. */
const pointer = (key: string): string => "/" + key.replace(/~/g, "~0").replace(/\//g, "~1");

/**
 * The top-level members of every STATE_SNAPSHOT in the bodies: the members LangGraph writes, but
 * `__proto__`, which no op can name (protocol/README.md §3), so no `own` may hold it.
 */
function ownMembers(bodies: readonly string[]): string[] {
  const keys = new Set<string>();
  for (const body of bodies)
    for (const line of body.split("\n")) {
      if (!line.startsWith("data: ")) continue;
      const event = JSON.parse(line.slice(6)) as { type: string; snapshot?: Record<string, unknown> };
      if (event.type === "STATE_SNAPSHOT" && event.snapshot) for (const k of Object.keys(event.snapshot)) if (k !== "__proto__") keys.add(k);
    }
  return [...keys].map(pointer);
}

interface Said {
  level: string;
  text: string;
}

/** One HttpAgent run; what @ag-ui/client warned or raised is returned, not thrown, and goes in the summary. */
async function runOnce(agent: HttpAgent, runId: string, forwardedProps: Record<string, unknown> | undefined): Promise<Said[]> {
  const said: Said[] = [];
  const warn = console.warn;
  const error = console.error;
  console.warn = (...a: unknown[]) => void said.push({ level: "warn", text: String(a[0]).slice(0, 300) });
  console.error = (...a: unknown[]) => void said.push({ level: "error", text: String(a[0]).slice(0, 300) });
  try {
    await agent.runAgent({ runId, ...(forwardedProps ? { forwardedProps } : {}) });
  } catch (e) {
    said.push({ level: "threw", text: String(e).slice(0, 300) });
  } finally {
    console.warn = warn;
    console.error = error;
  }
  return said;
}

async function recordGraph(base: string, spec: GraphSpec): Promise<string> {
  const exchanges: Exchange[] = [];
  const [run1, run2] = spec.runs;
  const agent = new HttpAgent({
    url: base + spec.path,
    threadId: `${spec.graph}-thread`,
    initialState: { [CLIENT_KEY]: CLIENT_UI },
    initialMessages: [{ id: `${spec.graph}-user-1`, role: "user", content: run1.text ?? "" }],
    fetch: recordingFetch(exchanges),
  });
  const said1 = await runOnce(agent, `${spec.graph}-run-1`, run1.forwardedProps);
  const held1 = structuredClone(agent.state) as Record<string, unknown>;
  agent.setState({ ...held1, [CLIENT_KEY]: CLIENT_UI });
  if (run2.text !== undefined) agent.addMessage({ id: `${spec.graph}-user-2`, role: "user", content: run2.text });
  const said2 = await runOnce(agent, `${spec.graph}-run-2`, run2.forwardedProps);

  if (exchanges.length !== 2) throw new Error(`${spec.graph}: ${exchanges.length} requests, expected 2`);
  const whole = await Promise.all(exchanges.map((e) => e.read));
  const runs = exchanges.map((e) => e.run);
  const fixture = {
    graph: spec.graph,
    about: spec.about,
    path: spec.path,
    own: ownMembers(runs.map((r) => r.body)),
    clientKey: CLIENT_KEY,
    runs,
  };
  const file = path.join(OUT, `${spec.graph}.json`);
  writeFileSync(file, JSON.stringify(fixture, null, 1) + "\n");
  const sizes = runs.map((r) => Buffer.byteLength(r.body)).join("+");
  const kept = (s: Record<string, unknown>) => (CLIENT_KEY in s ? "kept" : "wiped");
  const notes = [...said1.map((s) => `run 1 ${s.level}: ${s.text}`), ...said2.map((s) => `run 2 ${s.level}: ${s.text}`)];
  return [
    `${spec.graph}: bodies ${sizes} bytes, read whole ${whole.join("/")}, own ${fixture.own.join(" ")},`,
    `  client after run 1: ${kept(held1)} ${CLIENT_KEY}; after run 2: ${kept(agent.state as Record<string, unknown>)} ${CLIENT_KEY}`,
    ...notes.map((n) => `  ${n.replace(/\s+/g, " ")}`),
  ].join("\n");
}

/** Starts server.py on a free port and waits until every endpoint answers its health check. */
async function startServer(python: string): Promise<{ base: string; stop: () => void }> {
  const port = await freePort();
  const child = spawn(python, [path.join(HERE, "server.py"), String(port)], { stdio: ["ignore", "ignore", "inherit"] });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server.py exited with ${child.exitCode}`);
    try {
      const res = await fetch(`${base}${SPECS[0]?.path ?? "/recipe"}/health`);
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error("server.py did not answer within 120 s");
    await new Promise((r) => setTimeout(r, 250));
  }
  return { base, stop: () => void child.kill("SIGTERM") };
}

async function main(): Promise<void> {
  // undici reports a connection the server broke off once more, as an unhandled rejection of its own.
  process.on("unhandledRejection", (e) => console.log(`  (unhandled rejection: ${String(e)})`));
  const { values } = parseArgs({ options: { python: { type: "string" }, only: { type: "string", multiple: true } } });
  if (!values.python) throw new Error("usage: record.ts --python PYTHON [--only GRAPH]...");
  const only = values.only ?? [];
  const specs = SPECS.filter((s) => only.length === 0 || only.includes(s.graph));
  mkdirSync(OUT, { recursive: true });
  const server = await startServer(values.python);
  try {
    for (const spec of specs) console.log(await recordGraph(server.base, spec));
  } finally {
    server.stop();
  }
}

await main();
