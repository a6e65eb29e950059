/**
 * B13 for Go (issue 24), beside the Python middleware's B13: events per
 * second through aguistate.Middleware in front of a net/http handler that
 * streams 100,000 small STATE_DELTA events (flushing after each), against the
 * same handler without it, read by a client that parses every event. The
 * program is bench/go/middleware, in B18's module; it alternates rounds of
 * the two and prints each round's events per second.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";
import { goBuild, goEnv } from "../scripts/harness/go.js";
import { SEA } from "../scripts/harness/process.js";
import { stat } from "./lib.js";
import { f, range, type Row } from "./report.js";

const WHAT = "events/s through the Go middleware (aguistate.Middleware, own /toolState), one net/http stream of 100,000 small STATE_DELTA events flushed one by one, read by a client that parses each";

export function goMiddleware(emit: (r: Row) => void, note: (text: string) => void, quick: boolean): void {
  if (spawnSync("go", ["version"], { stdio: "ignore", timeout: 60_000 }).status !== 0) {
    note("!!! B13go SKIPPED: go not found on this machine. Install it as .ci/run does to measure it.");
    emit({ id: "B13go", what: WHAT, ours: "SKIPPED", reference: "go not found", ratio: "n/a", target: "(reported)", met: false });
    return;
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), "agui-bench-mw-go-"));
  try {
    const exe = goBuild(path.join(ROOT, "bench/go"), "./middleware", tmp);
    const rounds = quick ? 3 : 9;
    const out = execFileSync(exe, [String(rounds), "100000", SEA.file, ...SEA.args], { env: goEnv(tmp), stdio: ["ignore", "pipe", "inherit"], timeout: 1_800_000 });
    const r = JSON.parse(out.toString()) as { plain: number[]; repaired: number[] };
    const ours = stat(r.repaired);
    const plain = stat(r.plain);
    emit({
      id: "B13go",
      what: WHAT,
      ours: range(ours, 0),
      reference: `the same handler without it: ${range(plain, 0)}`,
      ratio: f(ours.median / plain.median, 2),
      target: "(reported, beside B13)",
      met: true,
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

const FIRST = "time to the first event of the first stream after a net/http app behind aguistate.NewMiddleware is ready (own /toolState; a fresh app, so a fresh sidecar, each round), ms";

/**
 * B22go (issue 31), beside the Python middleware's first-stream figure: the
 * program is bench/go/firststream. Each round starts an app whose
 * NewMiddleware has returned, then times a first stream and a later one on
 * it; the figure is the median of the rounds' differences. Beside it, in the
 * note, the first stream behind Middleware(nil, ...), which starts the
 * sidecar at the first stream, as every Go app did before.
 */
export function goFirstStream(emit: (r: Row) => void, note: (text: string) => void, quick: boolean): void {
  if (spawnSync("go", ["version"], { stdio: "ignore", timeout: 60_000 }).status !== 0) {
    note("!!! B22go SKIPPED: go not found on this machine. Install it as .ci/run does to measure it.");
    emit({ id: "B22go", what: FIRST, ours: "SKIPPED", reference: "go not found", ratio: "n/a", target: "≤ +20 ms", met: false });
    return;
  }
  const tmp = mkdtempSync(path.join(os.tmpdir(), "agui-bench-first-go-"));
  try {
    const exe = goBuild(path.join(ROOT, "bench/go"), "./firststream", tmp);
    const rounds = quick ? 3 : 9;
    const out = execFileSync(exe, [String(rounds), SEA.file, ...SEA.args], { env: goEnv(tmp), stdio: ["ignore", "pipe", "inherit"], timeout: 600_000 });
    const r = JSON.parse(out.toString()) as { first: number[]; later: number[]; lazy: number[] };
    const added = stat(r.first.map((ms, i) => ms - (r.later[i] ?? NaN)));
    emit({
      id: "B22go",
      what: FIRST,
      ours: range(stat(r.first), 1),
      reference: `a later stream: ${range(stat(r.later), 1)}`,
      ratio: `+${f(added.median, 1)}`,
      target: "≤ +20 ms",
      met: added.median <= 20,
    });
    note(`B22go: the first stream behind Middleware(nil, ...), which starts the sidecar then: ${range(stat(r.lazy), 0)} ms.`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
