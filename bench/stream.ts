import { spawn } from "node:child_process";
import { appendFileSync, closeSync, copyFileSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { MB, sampleRss } from "../scripts/harness/os.js";
import { BINARY } from "../scripts/harness/process.js";
import { alternate } from "./lib.js";
import { f, range, type Row } from "./report.js";

/**
 * B10: `agui-state fix` on a long NDJSON stream, against JSON.parse of its
 * lines alone, each a process reading the same file, in alternating rounds;
 * and fix's peak resident memory on that stream and on the stream twice over,
 * which must be the same: fix keeps the mirror and a bounded memory of
 * message ids, never the stream (V8 sizes its young generation up to its
 * limit early in a long run, which is why the comparison is not with a
 * short stream).
 */

const J = JSON.stringify;

/**
 * One run of an agent as it streams: a snapshot of its state, text tokens,
 * a tool call, deltas (most fine, two that fix mends: an append to an array
 * that is not there, a replace of a member that is not there), and an
 * activity with its deltas. Message ids are new in each run.
 */
function agentRun(n: number): string {
  const m = `m${n}`;
  const lines = [
    J({ type: "RUN_STARTED", threadId: "t", runId: `r${n}` }),
    J({ type: "STATE_SNAPSHOT", snapshot: { status: "thinking", count: 0, todos: [], toolState: { "raster-ops/dataset": "era5" } } }),
    J({ type: "TEXT_MESSAGE_START", messageId: m, role: "assistant" }),
  ];
  for (let i = 0; i < 40; i++) lines.push(J({ type: "TEXT_MESSAGE_CONTENT", messageId: m, delta: ` token${i} of the answer` }));
  lines.push(J({ type: "TEXT_MESSAGE_END", messageId: m }), J({ type: "TOOL_CALL_START", toolCallId: `c${n}`, toolCallName: "search", parentMessageId: m }));
  for (let i = 0; i < 10; i++) lines.push(J({ type: "TOOL_CALL_ARGS", toolCallId: `c${n}`, delta: `{"q":"part ${i}"` }));
  lines.push(
    J({ type: "TOOL_CALL_END", toolCallId: `c${n}` }),
    J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/status", value: "searching" }, { op: "replace", path: "/count", value: n }] }),
    J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: { title: `task ${n}`, done: false } }] }),
    J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/notes/-", value: "needs an array first" }] }),
    J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/steps", value: [{ title: "fetch", done: true }] }] }),
    J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/toolState/raster-ops~1dataset", value: "cmip6" }] }),
    J({ type: "ACTIVITY_SNAPSHOT", messageId: "progress", activityType: "plan", content: { steps: [] } }),
    J({ type: "ACTIVITY_DELTA", messageId: "progress", activityType: "plan", patch: [{ op: "add", path: "/steps/-", value: "search" }] }),
    J({ type: "ACTIVITY_DELTA", messageId: "progress", activityType: "plan", patch: [{ op: "add", path: "/steps/-", value: "answer" }] }),
    J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/status", value: "done" }] }),
    J({ type: "RUN_FINISHED", threadId: "t", runId: `r${n}` }),
  );
  return lines.join("\n") + "\n";
}

/** Writes runs to a file until it holds `bytes`. */
export function writeStream(file: string, bytes: number): number {
  const fd = openSync(file, "w");
  let written = 0;
  for (let n = 0; written < bytes; n++) written += writeSync(fd, agentRun(n));
  closeSync(fd);
  return written;
}

/** JSON.parse of every line of the file, and nothing else: the reference, run as a process like fix. */
const PARSE_LINES = `
const fs = require("node:fs");
const fd = fs.openSync(process.argv[1], "r");
const buf = Buffer.alloc(1 << 16);
const decoder = new TextDecoder();
let rest = "", n = 0;
for (let k; (k = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) {
  const text = rest + decoder.decode(buf.subarray(0, k), { stream: true });
  let start = 0;
  for (let nl = text.indexOf("\\n"); nl !== -1; nl = text.indexOf("\\n", start)) { JSON.parse(text.slice(start, nl)); n++; start = nl + 1; }
  rest = text.slice(start);
}
if (rest.trim()) { JSON.parse(rest); n++; }
process.stdout.write(n + "\\n");
`;

/** Runs a process to its end with stdout to /dev/null; resolves with its wall time (ms) and peak RSS (bytes). */
function timed(file: string, args: string[]): Promise<{ ms: number; peak: number; code: number | null }> {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    const child = spawn(file, args, { stdio: ["ignore", "ignore", "inherit"] });
    const rss = sampleRss(child.pid as number, 10);
    child.on("error", reject);
    child.on("exit", (code) => resolve({ ms: performance.now() - t, peak: rss.stop().peak, code }));
  });
}

export async function fixThroughput(row: (r: Row) => void, quick: boolean): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-b10-"));
  try {
    const full = path.join(dir, "full.ndjson");
    writeStream(full, quick ? 20 * MB : 100 * MB);
    const bytes = statSync(full).size;
    const peaks = { full: 0, twice: 0, parse: 0 };
    const fix = async () => {
      const r = await timed(BINARY, ["fix", full]);
      if (r.code !== 0) throw new Error(`agui-state fix exited ${r.code}`);
      peaks.full = Math.max(peaks.full, r.peak);
      return r.ms;
    };
    const parse = async () => {
      const r = await timed(process.execPath, ["-e", PARSE_LINES, full]);
      peaks.parse = Math.max(peaks.parse, r.peak);
      return r.ms;
    };
    const [a, b] = await alternate(quick ? 2 : 5, fix, parse);
    // The same stream twice over, as long again, and memory must not follow. Read from a file, as the
    // runs above are: fed on stdin, the same stream twice peaked 7-15 MiB above the file read once,
    // and on stdin once about as high as twice (docs/benchmarks.md, B10): the pipe, not the length.
    const twice = path.join(dir, "twice.ndjson");
    copyFileSync(full, twice);
    appendFileSync(twice, readFileSync(full));
    peaks.twice = (await timed(BINARY, ["fix", twice])).peak;
    const mbs = (ms: number) => bytes / MB / (ms / 1000);
    const ratio = mbs(a.median) / mbs(b.median);
    row({
      id: "B10",
      what: `fix on a ${f(bytes / MB, 0)} MB NDJSON agent stream (runs of 66 events, 7 deltas of which 2 need fixing), MB/s; peak RSS, and on twice the stream`,
      ours: `${f(mbs(a.median), 1)} MB/s, ${range(a, 0)} ms; peak ${f(peaks.full / MB, 0)} MiB (twice as long: ${f(peaks.twice / MB, 0)} MiB)`,
      reference: `JSON.parse of its lines alone: ${f(mbs(b.median), 1)} MB/s, ${range(b, 0)} ms; peak ${f(peaks.parse / MB, 0)} MiB`,
      ratio: f(ratio, 2),
      target: "≥ 0.33; peak on twice ≤ 1.1×",
      met: ratio >= 0.33 && peaks.twice <= peaks.full * 1.1,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
