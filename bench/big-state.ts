/**
 * B25: a run with a 1 MB state (bench/big-state-run.ts: what a LangGraph
 * agent sends, ~6 whole-state STATE_SNAPSHOTs) through each middleware with
 * own = the server's members, and through `agui-state proxy --own` with the
 * same members, each against its own server read directly:
 * - Python: bench/big_state_server.py (Starlette under uvicorn), /own through
 *   AguiStateMiddleware, /plain without; the proxy stands in front of /plain.
 * - Go: bench/go/bigstate (net/http), /mw through aguistate.Middleware.
 * - Clojure: bench/big_state_server.clj (Jetty), /mw through wrap-agui-state.
 * The client (this process) posts the run's RunAgentInput (~1 MB of state
 * plus the client's `ui`), reads the answer whole and parses every event;
 * time per run. Every server runs on CPU 1 with its sidecar (the proxy too),
 * this process on CPU 0 (bench/proxy.ts's `pinned`); rounds go through all
 * of them in turn. B25 itself is the Python middleware's time over the
 * proxy's, against the same server.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";
import { goBuild } from "../scripts/harness/go.js";
import { BINARY, SEA, Sidecar, type Command } from "../scripts/harness/process.js";
import { bigRun, OWN, readBigRun, SNAPSHOTS } from "./big-state-run.js";
import { stat, type Stat } from "./lib.js";
import { pinned } from "./proxy.js";
import { f, range, type Row } from "./report.js";

const PYTHON = "/usr/bin/python3";
const JARS = ["data.json", "ring-core", "ring-jetty-adapter"].map((j) => `/usr/share/java/${j}.jar`);

/** Starts a server (pinned) and waits for its `listening on PORT|URL` line; its base URL. */
async function serve(command: Command, env: Record<string, string> = {}): Promise<{ server: Sidecar; base: string }> {
  const server = new Sidecar({ command: pinned(command), env, stderr: "read" });
  await server.until(() => /listening on \S+\n/.test(server.stdout.toString("utf8")), `${command.name}'s listening line`, 180_000);
  const at = /listening on (\S+)/.exec(server.stdout.toString("utf8"))?.[1] ?? "";
  return { server, base: at.startsWith("http") ? at : `http://127.0.0.1:${at}` };
}

async function stop(server: Sidecar): Promise<void> {
  server.kill("SIGTERM");
  await server.waitForExit(30_000).catch(() => server.kill());
}

interface Way {
  id: string;
  url: string;
  /** Repaired with own: each snapshot comes as a STATE_DELTA. */
  repaired: boolean;
  ms: number[];
}

export async function bigStateFigures(row: (r: Row) => void, note: (text: string) => void, quick: boolean): Promise<void> {
  if (spawnSync(PYTHON, ["-c", "import starlette, uvicorn"], { stdio: "ignore" }).status !== 0) {
    note("B25: NOT MEASURED: Debian's python3-starlette and python3-uvicorn are missing.");
    return;
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), "agui-bench-big-"));
  const servers: Sidecar[] = [];
  try {
    const run = bigRun();
    const file = path.join(tmp, "run.sse");
    writeFileSync(file, run.events.join(""));
    const ways: Way[] = [];
    const way = (id: string, url: string, repaired: boolean) => ways.push({ id, url, repaired, ms: [] });

    const py = await serve({ name: "uvicorn (bench/big_state_server.py)", file: PYTHON, args: [path.join(ROOT, "bench/big_state_server.py"), file, ...OWN] }, { AGUI_STATE_BIN: BINARY });
    servers.push(py.server);
    const proxy = await serve({ name: "agui-state proxy", file: SEA.file, args: [...SEA.args, "proxy", "--upstream", py.base, "--listen", "127.0.0.1:0", "--log-level", "warn", ...OWN.flatMap((o) => ["--own", o])] });
    servers.push(proxy.server);
    way("py direct", `${py.base}/plain`, false);
    way("py", `${py.base}/own`, true);
    way("proxy", `${proxy.base}/plain`, true);

    if (spawnSync("go", ["version"], { stdio: "ignore", timeout: 60_000 }).status === 0) {
      const exe = goBuild(path.join(ROOT, "bench/go"), "./bigstate", tmp);
      const go = await serve({ name: "bench/go/bigstate", file: exe, args: [file, OWN.join(","), SEA.file, ...SEA.args] });
      servers.push(go.server);
      way("go direct", `${go.base}/plain`, false);
      way("go", `${go.base}/mw`, true);
    } else note("!!! B25go SKIPPED: go not found on this machine. Install it as .ci/run does to measure it.");

    if (spawnSync("bash", ["-c", `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`], { stdio: "ignore", timeout: 60_000 }).status === 0) {
      const classpath = [...JARS, path.join(ROOT, "clients/clojure/src")].join(":");
      const clj = await serve({ name: "clojure (bench/big_state_server.clj)", file: "clojure", args: ["-cp", classpath, path.join(ROOT, "bench/big_state_server.clj"), file, OWN.join(",")] }, { AGUI_STATE_BIN: SEA.file });
      servers.push(clj.server);
      way("clj direct", `${clj.base}/plain`, false);
      way("clj", `${clj.base}/mw`, true);
    } else note("!!! B25clj SKIPPED: clojure with libdata-json-clojure, libring-core-clojure and libring-jetty-adapter-clojure not found.");

    // Warm-up rounds (the JIT of each server and sidecar), each answer checked: the whole run, its
    // snapshots as they came directly, and as one STATE_DELTA each (own) through every repair.
    for (let w = 0; w < 2; w++) {
      for (const { id, url, repaired } of ways) {
        const got = await readBigRun(url, run.body);
        const want = repaired ? { snapshots: 0, deltas: SNAPSHOTS } : { snapshots: SNAPSHOTS, deltas: 0 };
        if (got.events !== run.events.length || got.snapshots !== want.snapshots || got.deltas !== want.deltas) {
          throw new Error(`B25: ${id} answered ${JSON.stringify(got)}, want ${run.events.length} events, ${JSON.stringify(want)}`);
        }
      }
    }
    for (let r = 0; r < (quick ? 3 : 9); r++) for (const w of ways) w.ms.push((await readBigRun(w.url, run.body)).ms);

    const of = (id: string): Stat | undefined => {
      const w = ways.find((x) => x.id === id);
      return w ? stat(w.ms) : undefined;
    };
    const mb = f(run.body.length / 1e6, 2);
    const per = (id: string, via: string, label: string, against: string, what: string) => {
      const ours = of(via);
      const ref = of(against);
      if (!ours || !ref) return;
      row({ id, what: `${what}: ms per run (${SNAPSHOTS} STATE_SNAPSHOTs of a ${mb} MB state, own = the server's members), against the same server read directly`, ours: range(ours, 0), reference: `${label} directly: ${range(ref, 0)}`, ratio: f(ours.median / ref.median, 2), target: "(reported)", met: true });
    };
    per("B25py", "py", "uvicorn", "py direct", "the Python middleware (AguiStateMiddleware, Starlette under uvicorn)");
    per("B25p", "proxy", "uvicorn", "py direct", "`agui-state proxy --own` in front of the same uvicorn app");
    per("B25go", "go", "net/http", "go direct", "the Go middleware (aguistate.Middleware, net/http)");
    per("B25clj", "clj", "Jetty", "clj direct", "the Ring middleware (wrap-agui-state, Jetty)");
    const python = of("py") as Stat;
    const viaProxy = of("proxy") as Stat;
    const ratio = python.median / viaProxy.median;
    row({
      id: "B25",
      what: `a run with a ${mb} MB state (${SNAPSHOTS} whole-state STATE_SNAPSHOTs) through the Python middleware against \`proxy --own\` in front of the same uvicorn app, ms per run`,
      ours: range(python, 0),
      reference: `proxy: ${range(viaProxy, 0)}`,
      ratio: f(ratio, 2),
      target: "≤ 1.10",
      met: ratio <= 1.1,
    });
    // The Python server's and the proxy's warnings (Go's and Jetty's stderr carry their INFO lines).
    for (const s of servers.slice(0, 2)) if (s.stderr.trim() !== "") note(`B25: a server logged: ${s.stderr.trim().split("\n").slice(-2).join(" | ")}`);
  } finally {
    for (const s of servers) await stop(s);
    rmSync(tmp, { recursive: true, force: true });
  }
}
