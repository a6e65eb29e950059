/**
 * Issue 24's B13: the Python middleware (clients/python/agui_state/asgi.py)
 * in front of a Starlette app under uvicorn (bench/asgi_server.py), against
 * the same app without it, in the same server, rounds alternating.
 * - Throughput: the app streams 100,000 small STATE_DELTA events, each sent
 *   on its own; this process reads the stream and parses every event (split
 *   at blank lines, JSON.parse of its data). Events per second, through the
 *   middleware over without it.
 * - Latency: one event every 10 ms, each carrying the wall-clock microsecond
 *   at which the app yielded it; the client notes when it parsed it. What the
 *   middleware adds is the difference of the medians (and of the p99s).
 * The server runs on CPU 1 (with its sidecar) and this process on CPU 0,
 * where taskset is there (bench/proxy.ts's `pinned`).
 */
import { spawnSync } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT } from "../scripts/harness/fixtures.js";
import { BINARY, Sidecar } from "../scripts/harness/process.js";
import { alternate, stat } from "./lib.js";
import { pinned } from "./proxy.js";
import { f, range, type Row } from "./report.js";

const PYTHON = "/usr/bin/python3";
const EVERY_MS = 10;

/** Reads one stream, parsing every event; returns the events and, for paced ones, each one's latency in ms. */
function read(url: string): Promise<{ events: number; ms: number; latencies: number[] }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const latencies: number[] = [];
    let events = 0;
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" }, agent: false }, (res) => {
      let rest = "";
      res.setEncoding("utf8");
      res.on("data", (text: string) => {
        const nowUs = (performance.timeOrigin + performance.now()) * 1000;
        const blocks = (rest + text).split("\n\n");
        rest = blocks.pop() ?? "";
        for (const b of blocks) {
          if (!b.includes("data: ")) continue; // the opening id block (protocol/README.md §16): no event
          const event = JSON.parse(b.slice(b.indexOf("data: ") + 6)) as { type: string; delta?: { path: string; value: unknown }[] };
          events++;
          const op = event.delta?.[0];
          if (op?.path === "/toolState/at" && typeof op.value === "number") latencies.push((nowUs - op.value) / 1000);
        }
      });
      res.on("end", () => resolve({ events, ms: performance.now() - started, latencies }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ threadId: "t", runId: "r", state: { ui: { panel: "layers" } }, messages: [], tools: [], context: [], forwardedProps: {} }));
  });
}

const percentile = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number;
};

export async function asgiFigures(row: (r: Row) => void, note: (text: string) => void, quick: boolean): Promise<void> {
  if (spawnSync(PYTHON, ["-c", "import starlette, uvicorn"], { stdio: "ignore" }).status !== 0) {
    note("B13: NOT MEASURED: Debian's python3-starlette and python3-uvicorn are missing.");
    return;
  }
  const server = new Sidecar({ command: pinned({ name: "uvicorn (bench/asgi_server.py)", file: PYTHON, args: [path.join(ROOT, "bench/asgi_server.py")] }), env: { AGUI_STATE_BIN: BINARY }, stderr: "read" });
  try {
    await server.until(() => /listening on \d+\n/.test(server.stdout.toString("utf8")), "the server's listening line", 60_000);
    const base = `http://127.0.0.1:${/listening on (\d+)/.exec(server.stdout.toString("utf8"))?.[1] ?? ""}`;
    const n = quick ? 20_000 : 100_000;
    const burst = (via: string) => async (): Promise<number> => {
      const r = await read(`${base}/${via}/burst?n=${n}`);
      if (r.events !== n + 3) throw new Error(`B13: ${r.events} of ${n + 3} events came through /${via}`);
      return r.events / (r.ms / 1000);
    };
    await burst("mw")(); // the sidecar starts on the first stream
    await burst("plain")();
    const [ours, ref] = await alternate(quick ? 3 : 5, burst("mw"), burst("plain"));
    const ratio = ours.median / ref.median;
    row({
      id: "B13",
      what: `events per second through the Python middleware (AguiStateMiddleware, own /toolState) in front of a Starlette app under uvicorn streaming ${f(n, 0)} small STATE_DELTA events, the client parsing every event`,
      ours: range(ours, 0),
      reference: `without it: ${range(ref, 0)}`,
      ratio: f(ratio, 2),
      target: "≥ 0.5",
      met: ratio >= 0.5,
    });

    const paced = quick ? 100 : 300;
    const rounds = quick ? 2 : 4;
    const mine: number[] = [];
    const theirs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      mine.push(...(await read(`${base}/mw/paced?n=${paced}&ms=${EVERY_MS}`)).latencies);
      theirs.push(...(await read(`${base}/plain/paced?n=${paced}&ms=${EVERY_MS}`)).latencies);
    }
    if (mine.length !== paced * rounds || theirs.length !== paced * rounds) throw new Error(`B13: ${mine.length} and ${theirs.length} of ${paced * rounds} paced events came through`);
    const p50 = percentile(mine, 50) - percentile(theirs, 50);
    const p99 = percentile(mine, 99) - percentile(theirs, 99);
    row({
      id: "B13b",
      what: `latency added per event by the Python middleware, the app sending one event every ${EVERY_MS} ms (${f(paced * rounds, 0)} events), ms: p50 / p99`,
      ours: `${f(percentile(mine, 50), 2)} / ${f(percentile(mine, 99), 2)}`,
      reference: `without it: ${f(percentile(theirs, 50), 2)} / ${f(percentile(theirs, 99), 2)}`,
      ratio: `+${f(p50, 2)} / +${f(p99, 2)}`,
      target: "p50 +≤ 1",
      met: p50 <= 1,
    });
    const spread = stat(mine);
    note(`B13b: through the middleware, min ${f(spread.min, 2)} ms, max ${f(spread.max, 2)} ms per event.`);
    if (server.stderr !== "") note(`B13: the server logged: ${server.stderr.trim().split("\n").slice(-3).join(" | ")}`);
  } finally {
    server.kill("SIGTERM");
    await server.waitForExit(60_000).catch(() => server.kill());
  }
}

/** The ms from sending a request to parsing the first event of its response; the rest is read to its end. */
function firstEvent(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first: number | undefined;
    let text = "";
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" }, agent: false }, (res) => {
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        if (first !== undefined) return;
        text += d;
        // The first event's block: the opening id block before it (§16) is no event.
        const at = text.indexOf("data: ");
        const end = at < 0 ? -1 : text.indexOf("\n\n", at);
        if (end < 0) return;
        JSON.parse(text.slice(at + 6, end));
        first = performance.now() - started;
      });
      res.on("end", () => (first === undefined ? reject(new Error(`no event came from ${url}`)) : resolve(first)));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ threadId: "t", runId: "r", state: {}, messages: [], tools: [], context: [], forwardedProps: {} }));
  });
}

/** A fresh bench/asgi_server.py, with its lifespan on or off; resolves once uvicorn has finished its startup. */
async function freshServer(lifespan: "on" | "off"): Promise<{ base: string; server: Sidecar }> {
  const server = new Sidecar({ command: pinned({ name: "uvicorn (bench/asgi_server.py)", file: PYTHON, args: [path.join(ROOT, "bench/asgi_server.py"), "--lifespan", lifespan] }), env: { AGUI_STATE_BIN: BINARY }, stderr: "read" });
  await server.until(() => /listening on \d+\n/.test(server.stdout.toString("utf8")), "the server's listening line", 60_000);
  return { base: `http://127.0.0.1:${/listening on (\d+)/.exec(server.stdout.toString("utf8"))?.[1] ?? ""}`, server };
}

/**
 * Issue 31's first stream: the time to the first event of the first stream
 * through the middleware after uvicorn has finished its startup (the sidecar
 * started in the app's lifespan), against that of a later stream of the same
 * server (its 5th). A fresh server per round; the figure is the difference of
 * the medians. The same with the lifespan off (the first stream starts the
 * sidecar, as before) is a note.
 */
export async function asgiFirstStream(row: (r: Row) => void, note: (text: string) => void, quick: boolean): Promise<void> {
  if (spawnSync(PYTHON, ["-c", "import starlette, uvicorn"], { stdio: "ignore" }).status !== 0) {
    note("B22py: NOT MEASURED: Debian's python3-starlette and python3-uvicorn are missing.");
    return;
  }
  const url = (base: string) => `${base}/mw/paced?n=1&ms=0`;
  const round = async (lifespan: "on" | "off"): Promise<[number, number]> => {
    const { base, server } = await freshServer(lifespan);
    try {
      const first = await firstEvent(url(base));
      let later = 0;
      for (let i = 0; i < 4; i++) later = await firstEvent(url(base));
      if (server.stderr !== "") note(`B22py: the server logged: ${server.stderr.trim().split("\n").slice(-3).join(" | ")}`);
      return [first, later];
    } finally {
      server.kill("SIGTERM");
      await server.waitForExit(60_000).catch(() => server.kill());
    }
  };
  const rounds = quick ? 3 : 7;
  const on: [number[], number[]] = [[], []];
  const off: [number[], number[]] = [[], []];
  for (let r = 0; r < rounds; r++) {
    for (const [lifespan, into] of [["on", on], ["off", off]] as const) {
      const [first, later] = await round(lifespan);
      into[0].push(first);
      into[1].push(later);
    }
  }
  const [first, later] = [stat(on[0]), stat(on[1])];
  const added = first.median - later.median;
  row({
    id: "B22py",
    what: "time to the first event of the first stream through the Python middleware after uvicorn has finished its startup (the sidecar started in the lifespan), ms",
    ours: range(first, 1),
    reference: `a later stream (the 5th): ${range(later, 1)}`,
    ratio: `+${f(added, 1)}`,
    target: "+≤ 20",
    met: added <= 20,
  });
  note(`B22py: with the lifespan off (the first stream starts the sidecar), the first stream's first event came after ${range(stat(off[0]), 1)} ms, a later one's after ${range(stat(off[1]), 1)} ms.`);
}
