import { sameJson } from "../harness/json.js";
import type { Response } from "../harness/jsonrpc.js";
import { statusKiB } from "../harness/os.js";
import { Peer } from "../harness/peer.js";
import { readCurve } from "./curve.js";
import { defaults, type Sample, type SoakOptions, type SoakReport } from "./options.js";
import { Workload, type Pending } from "./workload.js";

/**
 * The soak: a long, realistic, replayable stream of requests against the real
 * sidecar, with every answer predicted before its request is sent.
 *
 * The sidecar handles the frames of its one input stream in order, so the
 * order in which requests are written is the order in which they act on its
 * thread store. The driver keeps an exact model of that store
 * (scripts/soak/model.ts) and updates it as it writes each request
 * (scripts/soak/workload.ts); every response is then checked against the outcome
 * the model predicted: result or error, version, delta, skipped ops, the
 * unknown-thread reason, and on every `stats` the live thread count, the
 * eviction count, the request count and the state bytes, exactly.
 */

/** What Node itself prints when a V8 flag makes the single executable reject its code cache. */
const NODE_WARNING = /^\(node:\d+\) Warning: Code cache data rejected\.$|^\(Use `.* --trace-warnings \.\.\.` to show where the warning was created\)$/;

const MAX_DETAILS = 20;

/** Runs one soak against a fresh sidecar. Never throws for a failed check: failures are in the report. */
export async function runSoak(input: SoakOptions): Promise<SoakReport> {
  const opts = defaults(input);
  const w = new Workload(opts);
  const failures: string[] = [];
  let mismatches = 0;
  const fail = (s: string): void => {
    mismatches++;
    if (failures.length < MAX_DETAILS) failures.push(s);
    else if (failures.length === MAX_DETAILS) failures.push("… further failures not listed");
  };
  const errors: Record<string, number> = {};
  const curve: Sample[] = [];
  /** What the model predicted for each request in flight, by id (= request number). */
  const pending = new Map<number, Pending>();
  let sent = 0;

  const spawnSidecar = (): Peer =>
    new Peer({
      command: { name: "agui-state", file: opts.binary, args: [] },
      args: ["--max-threads", String(opts.maxThreads), ...(opts.maxHeap ? ["--max-heap", opts.maxHeap] : [])],
      env: opts.nodeOptions ? { NODE_OPTIONS: opts.nodeOptions } : {},
      keepFrames: false,
    });
  const emptyRssKiB = await emptyRss(spawnSidecar());
  const peer = spawnSidecar();
  const pid = peer.pid;
  let stopped: string | undefined;

  const t0 = performance.now();
  let lastProgress = t0;
  let peakSeen = 0;

  const handle = (p: Pending, msg: Response): void => {
    const where = `request ${p.seq} (${p.label}${p.idx >= 0 ? ` on soak-${p.idx}` : ""})`;
    if ("error" in msg) {
      const e = msg.error;
      const reason = e.data?.["reason"];
      const key = `${e.code}${typeof reason === "string" ? ` ${reason}` : ""}`;
      errors[key] = (errors[key] ?? 0) + 1;
      if (!p.err) return fail(`${where}: error ${JSON.stringify(e).slice(0, 300)}, model expects a result`);
      if (e.code !== p.err.code) return fail(`${where}: error code ${e.code}, model expects ${p.err.code}: ${JSON.stringify(e).slice(0, 300)}`);
      for (const [k, v] of Object.entries(p.err.data)) {
        if (!sameJson(e.data?.[k], v)) return fail(`${where}: error data.${k} ${JSON.stringify(e.data?.[k])}, model says ${JSON.stringify(v)}`);
      }
      if (e.code === -32001) w.lost(p, String(reason));
      return;
    }
    if (p.err) return fail(`${where}: a result, model expects error ${JSON.stringify(p.err)}: ${JSON.stringify(msg.result).slice(0, 300)}`);
    const result = msg.result as Record<string, unknown>;
    const bad = p.ok?.(result);
    if (bad) fail(`${where}: ${bad}`);
    if (p.sample) {
      const s: Sample = { requests: p.seq, rssKiB: statusKiB(pid, "VmRSS"), threads: result["threads"] as number, stateBytes: result["stateBytes"] as number, evicted: result["evicted"] as number, elapsedMs: performance.now() - t0 };
      curve.push(s);
      input.onSample?.(s);
    }
  };

  await new Promise<void>((resolve) => {
    let done = false;
    let refill = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearInterval(watchdog);
      resolve();
    };
    const answered = (p: Pending, msg: Response): void => {
      pending.delete(p.seq);
      handle(p, msg);
      lastProgress = performance.now();
      // The answers of one stdout chunk resolve back to back: one refill after all of them, so
      // the next requests leave in one write.
      if (!refill) {
        refill = true;
        queueMicrotask(() => {
          refill = false;
          fill();
        });
      }
    };
    const lost = (e: Error): void => {
      if (done) return;
      stopped = e.message;
      fail(`the sidecar stopped answering after ${sent} requests, ${pending.size} unanswered: ${e.message.slice(0, 300)}; stderr: ${peer.stderr.slice(-2000)}`);
      finish();
    };
    const fill = (): void => {
      if (done) return;
      let text = "";
      // Request s goes out once request s - window is answered: at most
      // `window` in flight, and what the driver knows when it draws request s
      // does not depend on timing.
      while (pending.size < opts.window && sent < opts.requests && !pending.has(sent + 1 - opts.window)) {
        const seq = ++sent;
        const sample = seq === 1 || seq % opts.sampleEvery === 0 || seq === opts.requests;
        const { line, p } = w.next(seq, sample);
        pending.set(seq, p);
        // No per-call timer: the watchdog below is the guard for the whole run.
        peer.expect(seq, 0).then((msg) => answered(p, msg), lost);
        text += line;
        // The first request is a lone stats: the curve's row for the empty process.
        if (seq === 1) break;
      }
      if (text) void peer.write(text);
      if (sent >= opts.requests && pending.size === 0) finish();
    };
    const watchdog = setInterval(() => {
      const rss = statusKiB(pid, "VmRSS");
      if (!Number.isNaN(rss)) peakSeen = Math.max(peakSeen, rss);
      if (performance.now() - lastProgress > opts.stallMs) {
        fail(`no response for ${opts.stallMs} ms with ${pending.size} in flight (lost: ids ${[...pending.keys()].slice(0, 10).join(", ")})`);
        finish();
      }
    }, 1000);
    fill();
  });
  const durationMs = performance.now() - t0;

  const hwm = statusKiB(pid, "VmHWM");
  const peakRssKiB = stopped === undefined && !Number.isNaN(hwm) ? hwm : peakSeen;
  // End of input: the sidecar answers what it read (nothing is left) and exits 0.
  peer.end();
  let exitCode: number | null;
  try {
    exitCode = (await peer.waitForExit(10_000)).code;
  } catch {
    peer.kill();
    exitCode = (await peer.waitForExit()).code;
  }

  let stderrWarnings = 0;
  let nodeWarnings = 0;
  for (const line of peer.stderr.split("\n").filter(Boolean)) {
    try {
      if (((JSON.parse(line) as { level?: number }).level ?? 0) >= 40) stderrWarnings++;
    } catch {
      if (opts.nodeOptions && NODE_WARNING.test(line)) nodeWarnings++;
      else stderrWarnings++;
    }
  }

  if (pending.size && stopped === undefined) fail(`${pending.size} requests never answered (lost): ids ${[...pending.keys()].slice(0, 10).join(", ")}`);
  if (peer.unmatched.length || peer.orphans.length) fail(`${peer.unmatched.length + peer.orphans.length} responses answer no request in flight (duplicate, unknown or id null): ${JSON.stringify([...peer.unmatched, ...peer.orphans][0]).slice(0, 200)}`);
  if (peer.answered !== sent) fail(`${sent} requests sent, ${peer.answered} responses received`);
  if (exitCode !== 0 && stopped === undefined) fail(`the sidecar exited with ${exitCode} after stdin ended; stderr: ${peer.stderr.slice(-2000)}`);
  if (stderrWarnings) fail(`the sidecar logged ${stderrWarnings} warning or error lines; last stderr: ${peer.stderr.slice(-1000)}`);
  const s = w.store;
  if (s.evictions !== s.created - s.live.size - s.closed) fail(`model arithmetic: evictions ${s.evictions} != created ${s.created} - live ${s.live.size} - closed ${s.closed}`);
  const last = curve[curve.length - 1];
  if (last && last.requests === opts.requests && last.evicted !== s.created - s.live.size - s.closed) fail(`stats.evicted ${last.evicted} != threads opened ${s.created} - live ${s.live.size} - closed ${s.closed}`);

  const found = readCurve(curve, w.fullAt, w.plateauAt, s.evictions, opts, opts.checkMemory ? fail : () => undefined);
  if (mismatches > MAX_DETAILS) failures.push(`${mismatches} failures in all`);

  const liveStateBytes = last?.stateBytes ?? 0;
  return {
    options: opts,
    emptyRssKiB,
    liveStateBytes,
    churnRatio: liveStateBytes > 0 ? ((peakRssKiB - emptyRssKiB) * 1024) / liveStateBytes : undefined,
    sent,
    responses: peer.answered,
    curve,
    fullAt: w.fullAt,
    plateauAt: w.plateauAt,
    ...found,
    peakRssKiB,
    durationMs,
    evictions: s.evictions,
    created: s.created,
    closed: s.closed,
    live: s.live.size,
    errors,
    methods: w.methods,
    statsCalls: w.methods["stats"] ?? 0,
    stderrWarnings,
    nodeWarnings,
    exitCode,
    failures,
  };
}

/** The resident set of the same sidecar, started the same way, once it has answered one call: what B11 subtracts. */
async function emptyRss(p: Peer): Promise<number> {
  await p.ok("stats", {});
  const kib = statusKiB(p.pid, "VmRSS");
  p.end();
  await p.waitForExit(10_000);
  return kib;
}
