/**
 * B23 (issue 42): what a host's workers hold in sidecars, one per host (`serve --listen`, every
 * worker a connection) against one per worker, 8 workers. Each worker, as a middleware does at its
 * start, opens a thread, runs one small stream through and asks for `stats`; then everything sits
 * idle for 500 ms and the resident sets are read from /proc. The target is on the one per host, against
 * one idle sidecar that did one worker's warm-up: ≤ 1.3×.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Connection, Listening } from "../scripts/harness/listen.js";
import { statusKiB } from "../scripts/harness/os.js";
import { startPeer } from "../scripts/harness/peer.js";
import { stat } from "./lib.js";
import { f, range, type Row } from "./report.js";

const WORKERS = 8;
const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;

/** A worker's first calls: what its middleware's first request costs the sidecar. */
async function warmUp(call: (method: string, params: object) => Promise<Record<string, unknown>>, worker: number): Promise<void> {
  const threadId = `warm-${worker}`;
  await call("openRun", { threadId, state: { toolState: {} } });
  const { streamId } = await call("openStream", { state: { todos: [] }, own: ["/toolState"] });
  await call("fixStream", { streamId, text: sse({ type: "RUN_STARTED", threadId, runId: "r1" }) + sse({ type: "STATE_SNAPSHOT", snapshot: { toolState: { a: 1 } } }) + sse({ type: "RUN_FINISHED", threadId, runId: "r1" }) });
  await call("closeStream", { streamId });
  await call("stats", {});
}

const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 500));

async function perWorkerKiB(): Promise<number> {
  const peer = startPeer({ stderr: "ignore", keepFrames: false });
  await warmUp((m, p) => peer.ok(m, p), 0);
  await settle();
  await peer.ok("stats", {});
  const kib = statusKiB(peer.pid, "VmRSS");
  peer.end();
  await peer.waitForExit(60_000);
  return kib;
}

async function perHostKiB(dir: string, round: number): Promise<number> {
  const at = path.join(dir, `b23-${round}.sock`);
  const sidecar = Listening.start(["--listen", `unix:${at}`], { AGUI_STATE_LOG_LEVEL: "warn" });
  if ((await sidecar.ready) === undefined) throw new Error(`B23: the sidecar did not listen: ${sidecar.stderr}`);
  const workers = await Promise.all(Array.from({ length: WORKERS }, () => Connection.open(at)));
  await Promise.all(workers.map((w, i) => warmUp((m, p) => w.result(m, p as Record<string, unknown>), i)));
  await settle();
  await workers[0]?.result("stats");
  const kib = statusKiB(sidecar.child.pid as number, "VmRSS");
  await Promise.all(workers.map((w) => w.end()));
  await sidecar.stop();
  return kib;
}

export async function sharedSidecarMemory(row: (r: Row) => void, quick: boolean): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-b23-"));
  try {
    const rounds = quick ? 3 : 7;
    const one: number[] = [];
    const host: number[] = [];
    for (let i = 0; i < rounds; i++) {
      one.push((await perWorkerKiB()) / 1024);
      host.push((await perHostKiB(dir, i)) / 1024);
    }
    const [a, b] = [stat(host), stat(one)];
    const ratio = a.median / b.median;
    row({
      id: "B23",
      what: `sidecars' resident memory for ${WORKERS} workers, MiB: one per host (serve --listen, ${WORKERS} connections) against one idle sidecar (one worker's)`,
      ours: range(a),
      reference: `one per worker: ${range(b)} each, ${f(b.median * WORKERS, 0)} MiB for ${WORKERS}`,
      ratio: `${f(ratio, 2)}× (per worker: ${WORKERS}×)`,
      target: "≤ 1.3×",
      met: ratio <= 1.3,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
