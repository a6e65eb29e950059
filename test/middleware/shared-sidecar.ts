import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * The host's shared sidecar in a test (protocol/README.md §2, "One sidecar per host"): where it
 * listens, which processes serve it, and ending them. A sidecar that a worker starts in start mode
 * runs detached, in a session of its own, so that it outlives the worker: killing the workers does
 * not end it, and a test ends it itself.
 */

/** A fresh Unix socket address in a directory of its own (short: a socket path holds 103 bytes). */
export function socketAddress(): { address: string; dir: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-shared-"));
  return { address: `unix:${path.join(dir, "s.sock")}`, dir };
}

/** The pids of the processes whose command line holds `--listen ADDRESS`, from /proc. */
export function sidecarsServing(address: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
    } catch {
      continue; // it ended while we looked
    }
    if (argv.some((a, i) => a === "--listen" && argv[i + 1] === address)) pids.push(Number(name));
  }
  return pids;
}

/**
 * The pids serving `address` once the starts that lost have gone: several workers starting at once
 * each start one, and all but one exit 2 once they find it serving. A hang guard of 10 s, never an
 * assertion: whatever is left then is returned, for the test to judge.
 */
export async function settledSidecars(address: string): Promise<number[]> {
  for (let waited = 0; ; waited += 50) {
    const pids = sidecarsServing(address);
    if (pids.length <= 1 || waited >= 10_000) return pids;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** SIGKILL to every process serving `address`. */
export function killSidecars(address: string): void {
  for (const pid of sidecarsServing(address)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/**
 * Whether process `pid` has exited: no /proc entry, or a zombie. Not an empty command line: a process's
 * memory goes before its files as it exits, so for a moment it has none and still accepts connections.
 */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

/** Waits until process `pid` has exited, its socket closed (a hang guard of 10 s, never an assertion). */
export async function exited(pid: number): Promise<void> {
  for (let waited = 0; !gone(pid) && waited < 10_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
}
