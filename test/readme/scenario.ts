import { spawn, spawnSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import type { Step } from "./blocks.js";

/**
 * Runs a scenario's blocks (test/readme/blocks.ts) the way a reader at a shell
 * would: one after the other from `cwd`, each in bash with stdin closed, with
 * the directory and the exported variables one block leaves carried into the
 * next (a `cd` or an `export` lasts, as in a terminal). Every line of a block
 * must succeed: a failing line stops the block there with its status, `&&`
 * lists included. Servers a `serve` block starts run in a process group of
 * their own, killed by close().
 *
 * The one change made to the README's text: each port a `serve` block names is
 * replaced, in every block of the scenario, by a free port of this machine, so
 * that runs in parallel and other programs do not collide.
 */
export interface Result {
  status: number | null;
  stdout: string;
  stderr: string;
}

import { freePort } from "../../scripts/harness/ports.js";

export { freePort };

/** Whether something accepts connections on 127.0.0.1:port now. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** Whether any process of the group `pgid` (a detached child's pid) still runs. */
function alive(pgid: number | undefined): boolean {
  if (pgid === undefined) return false;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The block's lines joined where one ends in a backslash, each then checked: the first that fails ends the block. */
function checked(body: string): string {
  const logical: string[] = [];
  let pending = "";
  for (const line of body.replace(/\n$/, "").split("\n")) {
    if (line.endsWith("\\")) pending += line + "\n";
    else {
      logical.push(pending + line);
      pending = "";
    }
  }
  if (pending) logical.push(pending);
  return logical
    .filter((l) => l.trim() && !l.trim().startsWith("#"))
    .map((l) => `${l}\n__rc=$?; if [ "$__rc" -ne 0 ]; then exit "$__rc"; fi\n`)
    .join("");
}

export class ScenarioShell {
  private readonly state: string;
  private readonly groups: number[] = [];
  private readonly ports = new Map<string, string>();
  private serveLog = 0;

  constructor(
    private readonly work: string,
    cwd: string,
    private readonly env: Record<string, string>,
    private readonly timeoutMs: number,
  ) {
    this.state = path.join(work, ".scenario-state");
    mkdirSync(this.state, { recursive: true });
    writeFileSync(path.join(this.state, "cwd"), cwd);
    writeFileSync(path.join(this.state, "env"), "");
  }

  /** Chooses a free port for each port the scenario's serve blocks name. */
  async choosePorts(steps: readonly Step[]): Promise<void> {
    for (const s of steps) {
      if (s.kind !== "serve") continue;
      for (const p of s.args) if (!this.ports.has(p)) this.ports.set(p, String(await freePort()));
    }
  }

  /** The block's text with the scenario's ports replaced. */
  text(body: string): string {
    let out = body;
    for (const [from, to] of this.ports) out = out.replace(new RegExp(`(?<![\\d.])${from}(?!\\d)`, "g"), to);
    return out;
  }

  get cwd(): string {
    return readFileSync(path.join(this.state, "cwd"), "utf8").replace(/\n$/, "");
  }

  private script(body: string): string {
    const cwdFile = JSON.stringify(path.join(this.state, "cwd"));
    const envFile = JSON.stringify(path.join(this.state, "env"));
    return [`. ${envFile}`, `cd "$(cat ${cwdFile})"`, checked(body), `pwd > ${cwdFile}`, `export -p > ${envFile}`, ""].join("\n");
  }

  /** Writes a `file` block into the current directory. */
  file(name: string, body: string): void {
    writeFileSync(path.join(this.cwd, name), this.text(body));
  }

  /** Runs a `run` block to its end. */
  run(body: string): Result {
    const r = spawnSync("bash", ["-c", this.script(this.text(body))], {
      env: this.env,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: this.timeoutMs,
      maxBuffer: 256 * 1024 * 1024,
    });
    const killed = r.signal ? `\n(killed by ${r.signal}${r.error ? `: ${String(r.error)}` : ""})` : "";
    return { status: r.status, stdout: r.stdout, stderr: r.stderr + killed };
  }

  /**
   * Runs a `serve` block: its lines up to the last one ending in `&` start the
   * servers (in a process group of their own, output to a log); once every
   * port accepts connections, the rest runs as a `run` block.
   */
  async serve(body: string, ports: readonly string[]): Promise<Result> {
    const lines = body.replace(/\n$/, "").split("\n");
    const last = lines.map((l) => l.trimEnd().endsWith("&")).lastIndexOf(true);
    const background = lines.slice(0, last + 1).join("\n") + "\n";
    const rest = lines.slice(last + 1).join("\n") + "\n";
    const log = path.join(this.work, `serve-${++this.serveLog}.log`);
    const fd = openSync(log, "w");
    const child = spawn("bash", ["-c", this.script(this.text(background))], { env: this.env, detached: true, stdio: ["ignore", fd, fd] });
    closeSync(fd);
    if (child.pid !== undefined) this.groups.push(child.pid);
    const status = await new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    if (status !== 0) return { status, stdout: "", stderr: readFileSync(log, "utf8") };
    // A hang guard, not a figure under test: a server that never listens fails the block with its log.
    const deadline = Date.now() + this.timeoutMs;
    for (const p of ports.map((q) => Number(this.ports.get(q)))) {
      while (!(await accepts(p))) {
        if (!alive(child.pid)) return { status: null, stdout: "", stderr: `the servers exited, and nothing listens on port ${p}\n${readFileSync(log, "utf8")}` };
        if (Date.now() > deadline) return { status: null, stdout: "", stderr: `nothing listens on port ${p}\n${readFileSync(log, "utf8")}` };
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    const r = this.run(rest);
    return { ...r, stderr: `${r.stderr}\n--- the servers' output ---\n${existsSync(log) ? readFileSync(log, "utf8") : ""}` };
  }

  /** Stops every server the scenario started, with everything they started. */
  close(): void {
    for (const group of this.groups) {
      try {
        process.kill(-group, "SIGKILL");
      } catch {
        // the group is gone already
      }
    }
    this.groups.length = 0;
  }
}
