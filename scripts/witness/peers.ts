import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The JSON Patch libraries that agent servers run, as witnesses of our
 * deltas: python-json-patch (Debian python3-jsonpatch) and evanphx/json-patch
 * (Debian golang-github-evanphx-json-patch-dev). Each runs as one process per
 * batch of cases, never one per case.
 */

const HERE = path.dirname(fileURLToPath(import.meta.url));
/** Debian's interpreter, not the first python3 on PATH: that is where python3-jsonpatch is. */
const PYTHON = "/usr/bin/python3";
const GOPATH = "/usr/share/gocode";

export interface WitnessCase {
  id: number;
  doc: unknown;
  patch: unknown[];
}

export type Verdict = { ok: true; doc: unknown } | { ok: false; error: string };

export interface Witness {
  name: string;
  /** Applies every case; a missing verdict means the peer itself broke, which is reported as an error. */
  run(cases: readonly WitnessCase[]): Map<number, Verdict>;
}

/** Why a peer cannot run here, or undefined when it can. */
export type Probe = { witness: Witness; missing?: undefined } | { witness?: undefined; missing: string };

function parseVerdicts(name: string, stdout: string, stderr: string, status: number | null): Map<number, Verdict> {
  if (status !== 0) throw new Error(`${name} exited with ${status}: ${stderr.slice(-2000)}`);
  const out = new Map<number, Verdict>();
  for (const line of stdout.split("\n")) {
    if (!line.trim()) continue;
    const r = JSON.parse(line) as { id?: number; ok?: boolean; doc?: unknown; error?: string };
    if (typeof r.id !== "number") continue; // the trailer line, e.g. {"version": ...}
    if (r.id < 0) throw new Error(`${name}: ${r.error}`);
    out.set(r.id, r.ok ? { ok: true, doc: r.doc } : { ok: false, error: r.error ?? "refused" });
  }
  return out;
}

function runBatch(name: string, cmd: string, args: string[], cases: readonly WitnessCase[], env?: NodeJS.ProcessEnv): Map<number, Verdict> {
  const input = cases.map((c) => JSON.stringify(c)).join("\n") + "\n";
  const r = spawnSync(cmd, args, { input, encoding: "utf8", maxBuffer: 1 << 30, env, timeout: 600_000 });
  if (r.error) throw new Error(`${name}: ${r.error.message}`);
  return parseVerdicts(name, r.stdout, r.stderr, r.status);
}

export function pythonWitness(): Probe {
  const probe = spawnSync(PYTHON, ["-c", "import jsonpatch; print(jsonpatch.__version__)"], { encoding: "utf8" });
  if (probe.status !== 0) return { missing: `${PYTHON} with python3-jsonpatch` };
  const name = `python-json-patch ${probe.stdout.trim()}`;
  const script = path.join(HERE, "python_witness.py");
  return { witness: { name, run: (cases) => runBatch(name, PYTHON, [script], cases) } };
}

/** Builds the Go witness once per source version, in GOPATH mode against Debian's package (no module proxy). */
export function goWitness(): Probe {
  const source = path.join(HERE, "go_witness.go");
  if (spawnSync("go", ["version"]).status !== 0) return { missing: "go (golang-go)" };
  if (!existsSync(path.join(GOPATH, "src/github.com/evanphx/json-patch"))) return { missing: "golang-github-evanphx-json-patch-dev" };
  const hash = createHash("sha256").update(readFileSync(source)).digest("hex").slice(0, 12);
  const dir = path.join(os.tmpdir(), `agui-state-go-witness-${hash}`);
  const binary = path.join(dir, "go_witness");
  const env = { ...process.env, GO111MODULE: "off", GOPATH, GOCACHE: path.join(dir, "cache"), GOFLAGS: "" };
  if (!existsSync(binary)) {
    mkdirSync(dir, { recursive: true });
    const tmp = `${binary}.${process.pid}`;
    const b = spawnSync("go", ["build", "-o", tmp, source], { encoding: "utf8", env, cwd: dir });
    if (b.status !== 0) throw new Error(`building the Go witness failed: ${b.stderr}`);
    renameSync(tmp, binary); // concurrent test files may build at once; the rename is atomic
  }
  const version = spawnSync("dpkg-query", ["-W", "-f", "${Version}", "golang-github-evanphx-json-patch-dev"], { encoding: "utf8" }).stdout || "?";
  const name = `evanphx/json-patch ${version}`;
  return { witness: { name, run: (cases) => runBatch(name, binary, [], cases, env) } };
}
