/**
 * B22clj (issue 31), beside the Python and Go middleware's first-stream
 * figures: the time to the first event of the first stream after a Ring app
 * behind agui-state.ring/wrap-agui-state is ready, against a later stream's
 * on the same server. The program is bench/clojure_first_stream.clj: each
 * round is a fresh app on a fresh sidecar component (agui-state.ring/sidecar),
 * and the figure is the median of the rounds' differences. Beside it, in the
 * note, the first stream behind a middleware given no sidecar, which starts
 * its own at the first request.
 */
import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";
import { childEnv, SEA } from "../scripts/harness/process.js";
import { stat } from "./lib.js";
import { f, range, type Row } from "./report.js";

const JARS = ["data.json", "ring-core", "ring-jetty-adapter"].map((j) => `/usr/share/java/${j}.jar`);
const WHAT = "time to the first event of the first stream after a Ring app behind wrap-agui-state is ready (Jetty, own /toolState; a fresh app, so a fresh sidecar, each round), ms";

export function clojureFirstStream(emit: (r: Row) => void, note: (text: string) => void, quick: boolean): void {
  if (spawnSync("bash", ["-c", `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`], { stdio: "ignore", timeout: 60_000 }).status !== 0) {
    note("!!! B22clj SKIPPED: clojure with libdata-json-clojure, libring-core-clojure and libring-jetty-adapter-clojure not found. Install them as .ci/run does to measure it.");
    emit({ id: "B22clj", what: WHAT, ours: "SKIPPED", reference: "clojure or Ring not found", ratio: "n/a", target: "≤ +20 ms", met: false });
    return;
  }
  const rounds = quick ? 3 : 9;
  const classpath = [...JARS, path.join(ROOT, "clients/clojure/src")].join(":");
  // The middleware's sidecar is found as a deployment finds it: AGUI_STATE_BIN.
  const out = execFileSync("clojure", ["-cp", classpath, path.join(ROOT, "bench/clojure_first_stream.clj"), String(rounds)], {
    cwd: ROOT,
    env: childEnv({ AGUI_STATE_BIN: SEA.file }),
    stdio: ["ignore", "pipe", "ignore"],
    timeout: 600_000,
  });
  const r = JSON.parse(out.toString().trim().split("\n").pop() ?? "") as { first: number[]; later: number[]; lazy: number[] };
  const added = stat(r.first.map((ms, i) => ms - (r.later[i] ?? NaN)));
  emit({
    id: "B22clj",
    what: WHAT,
    ours: range(stat(r.first), 1),
    reference: `a later stream: ${range(stat(r.later), 1)}`,
    ratio: `${added.median >= 0 ? "+" : ""}${f(added.median, 1)}`,
    target: "≤ +20 ms",
    met: added.median <= 20,
  });
  note(`B22clj: the first stream behind wrap-agui-state given no sidecar, which starts its own then: ${range(stat(r.lazy), 0)} ms.`);
}
