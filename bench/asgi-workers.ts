/**
 * Issue 42's B24: events per second through the Python middleware under
 * `uvicorn --workers 4` with one sidecar for the host (`agui-state serve
 * --listen unix:PATH`, AGUI_STATE_SIDECAR), against the same server with a
 * sidecar per worker (the default), under the same load: `STREAMS` streams at
 * once of bench/asgi_server.py's /mw/burst (small STATE_DELTA events, each
 * sent on its own), this process parsing every event. Both servers are up
 * for the whole figure and rounds alternate. Every server process (uvicorn,
 * its workers, every sidecar) runs on CPU 1, this process on CPU 0 (where
 * taskset is there, bench/proxy.ts's `pinned`), as for B13.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT } from "../scripts/harness/fixtures.js";
import { freePort } from "../scripts/harness/ports.js";
import { BINARY, SEA, Sidecar } from "../scripts/harness/process.js";
import { alternate } from "./lib.js";
import { pinned } from "./proxy.js";
import { f, range, type Row } from "./report.js";

const PYTHON = "/usr/bin/python3";
const WORKERS = 4;
const STREAMS = 8;

/** Reads one stream to its end, parsing every event; the events. */
function read(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let events = 0;
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" }, agent: false }, (res) => {
      let rest = "";
      res.setEncoding("utf8");
      res.on("data", (text: string) => {
        const blocks = (rest + text).split("\n\n");
        rest = blocks.pop() ?? "";
        for (const b of blocks) {
          if (!b.includes("data: ")) continue; // the opening id block (protocol/README.md §16): no event
          JSON.parse(b.slice(b.indexOf("data: ") + 6));
          events++;
        }
      });
      res.on("end", () => resolve(events));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(JSON.stringify({ threadId: "t", runId: "r", state: { ui: { panel: "layers" } }, messages: [], tools: [], context: [], forwardedProps: {} }));
  });
}

/** `uvicorn --workers 4` serving bench/asgi_server.py's app, once every worker has finished its startup. */
async function workers(env: Record<string, string>): Promise<{ server: Sidecar; base: string }> {
  const port = await freePort();
  const args = ["-m", "uvicorn", "asgi_server:app", "--app-dir", path.join(ROOT, "bench"), "--workers", String(WORKERS), "--host", "127.0.0.1", "--port", String(port), "--log-level", "info", "--no-access-log"];
  const server = new Sidecar({ command: pinned({ name: "uvicorn --workers 4 (bench/asgi_server.py)", file: PYTHON, args }), env: { AGUI_STATE_BIN: BINARY, ...env }, stderr: "read" });
  await server.until(() => (server.stderr.match(/Application startup complete\./g) ?? []).length >= WORKERS, "the workers' startup", 120_000);
  return { server, base: `http://127.0.0.1:${port}` };
}

async function stop(server: Sidecar): Promise<void> {
  server.kill("SIGTERM"); // uvicorn ends its workers, each closing its sidecar (or its connection)
  await server.waitForExit(60_000).catch(() => server.kill());
}

export async function workersThroughput(row: (r: Row) => void, note: (text: string) => void, quick: boolean): Promise<void> {
  if (spawnSync(PYTHON, ["-c", "import starlette, uvicorn"], { stdio: "ignore" }).status !== 0) {
    note("B24: NOT MEASURED: Debian's python3-starlette and python3-uvicorn are missing.");
    return;
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), "agui-b24-"));
  const address = `unix:${path.join(tmp, "s.sock")}`;
  const running: Sidecar[] = [];
  try {
    const shared = new Sidecar({ command: pinned({ name: "agui-state serve --listen", file: SEA.file, args: [...SEA.args, "serve", "--listen", address] }), stderr: "ignore" });
    running.push(shared);
    await shared.until(() => shared.stdout.toString("utf8") === `listening on ${address}\n`, "the shared sidecar's listening line", 60_000);
    const one = await workers({ AGUI_STATE_SIDECAR: address });
    running.push(one.server);
    const each = await workers({});
    running.push(each.server);
    const n = quick ? 5_000 : 10_000;
    const load = (base: string) => async (): Promise<number> => {
      const started = performance.now();
      const got = await Promise.all(Array.from({ length: STREAMS }, () => read(`${base}/mw/burst?n=${n}`)));
      const seconds = (performance.now() - started) / 1000;
      for (const events of got) if (events !== n + 3) throw new Error(`B24: ${events} of ${n + 3} events came through`);
      return (STREAMS * (n + 3)) / seconds;
    };
    await load(one.base)(); // every worker's first streams: the pipeline loaded, the connections warm
    await load(each.base)();
    const [ours, ref] = await alternate(quick ? 3 : 7, load(one.base), load(each.base));
    const ratio = ours.median / ref.median;
    row({
      id: "B24",
      what: `events per second through the Python middleware under uvicorn --workers ${WORKERS}, ${STREAMS} streams at once of ${f(n, 0)} small STATE_DELTA events each, the client parsing every event: one sidecar for the host (serve --listen unix:PATH)`,
      ours: range(ours, 0),
      reference: `a sidecar per worker: ${range(ref, 0)}`,
      ratio: f(ratio, 2),
      target: "≥ 0.9",
      met: ratio >= 0.9,
    });
    for (const [name, s] of [["one sidecar", one.server], ["a sidecar per worker", each.server]] as const) {
      const said = s.stderr.split("\n").filter((l) => /^(WARNING|ERROR)|Traceback/.test(l));
      if (said.length) note(`B24 (${name}): the server logged: ${said.slice(-3).join(" | ")}`);
    }
  } finally {
    for (const s of running.reverse()) await stop(s);
    rmSync(tmp, { recursive: true, force: true });
  }
}
