/**
 * Issue 23's figures.
 * - B14: bytes written for a snapshot-per-tool-write stream through `fix
 *   --own /toolState`, against the stream as sent: 20 tools in a run, each
 *   writes one key of a state that also holds 50 KB of other members, and
 *   after each write the server sends the whole state as a STATE_SNAPSHOT
 *   (as Microsoft Agent Framework does). A note gives `--snapshots delta`.
 * - B12: the latency `proxy` adds per event when the upstream sends one event
 *   every 10 ms, against reading the upstream directly, in the same run: each
 *   event carries its sequence number, the upstream (in this process) notes
 *   when it wrote it, and the client (in this process too) when it read it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT } from "../scripts/harness/fixtures.js";
import { SEA, Sidecar, run } from "../scripts/harness/process.js";
import { stat } from "./lib.js";
import { pinned } from "./proxy.js";
import { f, note, type Row } from "./report.js";

const TOOLS = 20;
const OTHER_BYTES = 50 * 1024;

/** The stream of one run: RUN_STARTED, per tool a tool call, its write and the whole state, RUN_FINISHED. */
function snapshotStream(): string {
  const sse = (e: unknown): string => `data: ${JSON.stringify(e)}\n\n`;
  const other = { history: Array.from({ length: 64 }, (_, i) => ({ id: i, text: "x".repeat(OTHER_BYTES / 64 - 24) })) };
  const toolState: Record<string, unknown> = {};
  let out = sse({ type: "RUN_STARTED", threadId: "t", runId: "r" });
  for (let k = 0; k < TOOLS; k++) {
    out += sse({ type: "TOOL_CALL_START", toolCallId: `c${k}`, toolCallName: `tool_${k}` }) + sse({ type: "TOOL_CALL_END", toolCallId: `c${k}` });
    toolState[`tool-${k}`] = { status: "done", result: `r${k}` };
    out += sse({ type: "STATE_SNAPSHOT", snapshot: { toolState: structuredClone(toolState), ...other } });
  }
  return out + sse({ type: "RUN_FINISHED", threadId: "t", runId: "r" });
}

export async function snapshotBytes(row: (r: Row) => void): Promise<void> {
  const stream = snapshotStream();
  const sent = Buffer.byteLength(stream);
  const through = async (args: string[]): Promise<number> => {
    const r = await run(SEA, ["fix", ...args], stream);
    if (r.code !== 0) throw new Error(`B14: fix ${args.join(" ")} exited ${String(r.code)}`);
    return r.stdout.length;
  };
  const own = await through(["--own", "/toolState"]);
  const delta = await through(["--snapshots", "delta"]);
  const ratio = own / sent;
  row({
    id: "B14",
    what: `bytes written by \`fix --own /toolState\` for a run of ${TOOLS} tool writes, each followed by a STATE_SNAPSHOT of the whole state (${f(OTHER_BYTES / 1024, 0)} KB of other members)`,
    ours: `${f(own, 0)} B`,
    reference: `as sent: ${f(sent, 0)} B`,
    ratio: f(ratio, 3),
    target: "≤ 0.25",
    met: ratio <= 0.25,
  });
  note(`B14: the same stream through \`fix --snapshots delta\`: ${f(delta, 0)} B, ${f(delta / sent, 3)} of the stream as sent.`);
  await knownBaseline(row);
}

/**
 * B14k (issue 41): a run's first owned snapshot against a known baseline. A real LangGraph thread's
 * second run (test/fixtures/frameworks/langgraph/table.json: a 945 KB table, a snapshot at each node's
 * exit, a few rows changed), through `fix --own` with `--state` the run's request state (what the
 * client holds: the first snapshot is a diff) against without it (the baseline not known: the first
 * snapshot sends each owned member whole, the resynchronizing add).
 */
async function knownBaseline(row: (r: Row) => void): Promise<void> {
  const fixture = JSON.parse(readFileSync(path.join(ROOT, "test/fixtures/frameworks/langgraph/table.json"), "utf8")) as { own: string[]; runs: { request: { state: unknown }; body: string }[] };
  const run2 = fixture.runs[1];
  if (run2 === undefined) throw new Error("B14k: the fixture has no second run");
  const dir = mkdtempSync(path.join(tmpdir(), "agui-b14k-"));
  try {
    const stateFile = path.join(dir, "state.json");
    writeFileSync(stateFile, JSON.stringify(run2.request.state));
    const own = fixture.own.flatMap((p) => ["--own", p]);
    const through = async (args: string[]): Promise<number> => {
      const r = await run(SEA, ["fix", ...own, ...args], run2.body);
      if (r.code !== 0) throw new Error(`B14k: fix ${args.join(" ")} exited ${String(r.code)}`);
      return r.stdout.length;
    };
    const known = await through(["--state", stateFile]);
    const unknown = await through([]);
    const ratio = known / unknown;
    row({
      id: "B14k",
      what: "bytes written by `fix --own` for a real LangGraph thread's second run (a 945 KB table, recorded) with `--state` the request's state, against without it (the run's first snapshot resent whole)",
      ours: `${f(known, 0)} B`,
      reference: `baseline not known: ${f(unknown, 0)} B (as sent: ${f(Buffer.byteLength(run2.body), 0)} B)`,
      ratio: f(ratio, 4),
      target: "≤ 0.01",
      met: ratio <= 0.01,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const EVERY_MS = 10;

/** An upstream that sends `events` small deltas, one every 10 ms, and notes when it wrote each. */
function pacedUpstream(events: number, wrote: Map<number, number>): http.Server {
  return http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      res.write('data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n');
      let i = 0;
      const timer = setInterval(() => {
        if (i === events) {
          clearInterval(timer);
          res.end('data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n');
          return;
        }
        wrote.set(i, performance.now());
        res.write(`data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/seq","value":${i}}]}\n\n`);
        i++;
      }, EVERY_MS);
    });
  });
}

/** Reads one run and returns, for each event, the milliseconds from the upstream's write to the client's read. */
function latencies(url: string, wrote: Map<number, number>): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const out: number[] = [];
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      let rest = "";
      res.setEncoding("utf8");
      res.on("data", (text: string) => {
        const now = performance.now();
        const blocks = (rest + text).split("\n\n");
        rest = blocks.pop() ?? "";
        for (const b of blocks) {
          const m = /"value":(\d+)/.exec(b);
          const at = m ? wrote.get(Number(m[1])) : undefined;
          if (at !== undefined) out.push(now - at);
        }
      });
      res.on("end", () => resolve(out));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ threadId: "t", runId: "r", state: { seq: -1 }, messages: [], tools: [], context: [], forwardedProps: {} }));
  });
}

const percentile = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

export async function proxyLatency(row: (r: Row) => void, quick: boolean): Promise<void> {
  // Many short rounds rather than a few long ones: the p99 is the 12th worst of 1,200 events, and a
  // burst of other work on the machine in one long round lands on one side only.
  const events = quick ? 50 : 100;
  const rounds = quick ? 4 : 12;
  const wrote = new Map<number, number>();
  const upstream = pacedUpstream(events, wrote);
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const direct = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const proxy = new Sidecar({ command: pinned(SEA), args: ["proxy", "--upstream", direct, "--listen", "127.0.0.1:0", "--log-level", "warn"], stderr: "ignore" });
  try {
    await proxy.until(() => proxy.stdout.includes("\n"), "the proxy's listening line", 60_000);
    const via = /listening on (\S+)/.exec(proxy.stdout.toString("utf8"))?.[1] ?? "";
    const ours: number[] = [];
    const ref: number[] = [];
    await latencies(via, wrote);
    for (let r = 0; r < rounds; r++) {
      ours.push(...(await latencies(via, wrote)));
      ref.push(...(await latencies(direct, wrote)));
    }
    if (ours.length !== events * rounds) throw new Error(`B12: ${ours.length} of ${events * rounds} events came through the proxy`);
    const p50 = percentile(ours, 50) - percentile(ref, 50);
    const p99 = percentile(ours, 99) - percentile(ref, 99);
    row({
      id: "B12",
      what: `latency added per event by \`proxy\`, upstream sending one event every ${EVERY_MS} ms (${f(events * rounds, 0)} events), ms: p50 / p99`,
      ours: `${f(percentile(ours, 50), 2)} / ${f(percentile(ours, 99), 2)}`,
      reference: `direct: ${f(percentile(ref, 50), 2)} / ${f(percentile(ref, 99), 2)}`,
      ratio: `+${f(p50, 2)} / +${f(p99, 2)}`,
      target: "+≤ 1 / +≤ 5",
      met: p50 <= 1 && p99 <= 5,
    });
    const spread = stat(ours);
    note(`B12: through the proxy, min ${f(spread.min, 2)} ms, max ${f(spread.max, 2)} ms per event.`);
  } finally {
    proxy.kill("SIGTERM");
    await proxy.waitForExit(60_000).catch(() => proxy.kill());
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  }
}
