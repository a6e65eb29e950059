/**
 * B16, B17, B18, B5c and B18c: what a server pays per call in our clients,
 * each measured next to a bare client on the same kind of pipe to the same
 * binary (issue 26). The call is diffToolState of one key in a 100-key
 * namespace, one at a time. Each figure is one program in its client's
 * language (bench/python_clients.py, bench/go/, bench/clojure_clients.clj)
 * that alternates rounds of our client and its bare client in one process
 * and prints every round's µs per call, wall clock and the program's CPU;
 * the ratios here are of the wall-clock medians, the CPU is a note. A figure
 * whose toolchain is missing is a loud SKIPPED row, never a pass.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";
import { childEnv, SEA } from "../scripts/harness/process.js";
import { stat, type Stat } from "./lib.js";
import { f, range, type Row } from "./report.js";
import { goEnv } from "../scripts/harness/go.js";

const PYTHON = "/usr/bin/python3";
const DATA_JSON = "/usr/share/java/data.json.jar";

/** What a figure's program prints: per round, µs per call for each side. */
interface Rounds {
  ours: number[];
  bare: number[];
  oursCpu: number[];
  bareCpu: number[];
}

interface Figure {
  ours: Stat;
  bare: Stat;
  oursCpu: Stat;
  bareCpu: Stat;
}

const have = (cmd: string, ...args: string[]): boolean => spawnSync(cmd, args, { stdio: "ignore", timeout: 60_000 }).status === 0;

/** Runs a figure's program to completion and reads its rounds. */
function measure(file: string, args: string[], env: NodeJS.ProcessEnv = childEnv()): Figure {
  const out = execFileSync(file, args, { cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024, stdio: ["ignore", "pipe", "inherit"], timeout: 900_000 });
  const r = JSON.parse(out.toString()) as Rounds;
  return { ours: stat(r.ours), bare: stat(r.bare), oursCpu: stat(r.oursCpu), bareCpu: stat(r.bareCpu) };
}

type Emit = (r: Row) => void;
type Note = (text: string) => void;

function skipped(emit: Emit, note: Note, id: string, what: string, toolchain: string): void {
  note(`!!! ${id} SKIPPED: ${toolchain} not found on this machine. Install it as .ci/run does to measure it.`);
  emit({ id, what, ours: "SKIPPED", reference: `${toolchain} not found`, ratio: "n/a", target: "≥ 0.9", met: false });
}

/** The row of a figure whose target is ours ≥ `target` × the bare client's speed. */
function versusBare(emit: Emit, note: Note, id: string, what: string, bareName: string, fig: Figure, target: number | undefined): void {
  const ratio = fig.bare.median / fig.ours.median;
  emit({
    id,
    what,
    ours: range(fig.ours, 1),
    reference: `${bareName} ${range(fig.bare, 1)}`,
    ratio: f(ratio, 2),
    target: target === undefined ? "(reported)" : `≥ ${target} of bare`,
    met: target === undefined || ratio >= target,
  });
  note(`${id}, the client program's own CPU µs per call (medians of the rounds): ours ${f(fig.oursCpu.median, 1)}, ${bareName} ${f(fig.bareCpu.median, 1)}.`);
}

/** The sidecar's command line, as the figure programs spawn it. */
const sidecar = (): string[] => [SEA.file, ...SEA.args];

function python(emit: Emit, note: Note, rounds: number, calls: number): void {
  const B16 = "Python sync AguiState, diffToolState of 1 key in a 100-key namespace, one call at a time, µs per call";
  const B17 = "Python AsyncAguiState, the same call, one caller, µs per call";
  const B5c = "the whole cost of B16's call through AguiState vs a server's in-process diff of the same namespace, µs per call";
  if (!have(PYTHON, "-c", "import json")) {
    for (const [id, what] of [["B16", B16], ["B17", B17], ["B5c", B5c]] as const) skipped(emit, note, id, what, PYTHON);
    return;
  }
  const program = path.join(ROOT, "bench/python_clients.py");
  const run = (figure: string) => measure(PYTHON, [program, figure, String(rounds), String(calls), ...sidecar()]);
  versusBare(emit, note, "B16", B16, "bare client (dumps, write, flush, readline, loads)", run("sync"), 0.9);
  versusBare(emit, note, "B17", B17, "bare asyncio client (write, drain, readline, loads)", run("async"), 0.9);
  const many = run("async64");
  note(`B17 with 64 callers at once: AsyncAguiState ${range(many.ours, 1)} µs per call (pipelined), the bare asyncio client one at a time ${range(many.bare, 1)}.`);
  if (!have(PYTHON, "-c", "import jsonpatch")) {
    skipped(emit, note, "B5c", B5c, "python3-jsonpatch");
    return;
  }
  const inproc = run("inproc");
  emit({
    id: "B5c",
    what: B5c,
    ours: range(inproc.ours, 1),
    reference: `python3-jsonpatch make_patch + apply_patch in process ${range(inproc.bare, 1)}`,
    ratio: `${f(inproc.bare.median / inproc.ours.median, 1)}× faster`,
    target: "(reported)",
    met: true,
  });
}

function go(emit: Emit, note: Note, rounds: number, calls: number): void {
  const B18 = "Go client, the same call, one at a time, µs per call";
  if (!have("go", "version")) return skipped(emit, note, "B18", B18, "go");
  const tmp = mkdtempSync(path.join(os.tmpdir(), "agui-bench-go-"));
  try {
    const exe = path.join(tmp, "b18");
    execFileSync("go", ["build", "-o", exe, "."], { cwd: path.join(ROOT, "bench/go"), env: goEnv(tmp), stdio: ["ignore", "ignore", "inherit"], timeout: 600_000 });
    versusBare(emit, note, "B18", B18, "bare bufio client (Marshal, Write, ReadBytes, Unmarshal)", measure(exe, [String(rounds), String(calls), ...sidecar()]), 0.9);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

function clojure(emit: Emit, note: Note, rounds: number, calls: number): void {
  const B18c = "Clojure client, the same call, one at a time, µs per call";
  if (!have("bash", "-c", `command -v clojure && test -f ${DATA_JSON}`)) return skipped(emit, note, "B18c", B18c, "clojure with libdata-json-clojure");
  const classpath = [DATA_JSON, path.join(ROOT, "clients/clojure/src")].join(":");
  const fig = measure("clojure", ["-cp", classpath, path.join(ROOT, "bench/clojure_clients.clj"), String(rounds), String(calls), ...sidecar()]);
  versusBare(emit, note, "B18c", B18c, "bare client (write-str, write, flush, readLine, read-str)", fig, undefined);
}

/** Every figure of issue 26, in the order of the table. */
export function clientFigures(emit: Emit, note: Note, quick: boolean, wanted: (...ids: string[]) => boolean): void {
  const rounds = quick ? 9 : 21;
  const calls = quick ? 300 : 1000;
  if (wanted("B16", "B17", "B5c")) python(emit, note, rounds, calls);
  if (wanted("B18")) go(emit, note, rounds, calls);
  if (wanted("B18c")) clojure(emit, note, rounds, calls);
}
