/**
 * The runtime under the binary (issue 33): every binary embeds the Node pinned in
 * scripts/node-runtime.json (26.10.0), where the bench's own node (this machine's, Node 20 here) ran
 * the binaries before. B8's reference is `node -e 0` of that same pinned Node, so the ratio is the
 * binary's own cost over its runtime's; B8m is the idle sidecar's resident memory, the binary against
 * the same bundle run by this machine's node (the runtime the binaries had before) and by the pinned
 * Node, side by side in one run.
 */
import { execFileSync } from "node:child_process";
import path from "node:path";
import { ROOT } from "../scripts/harness/fixtures.js";
import { statusKiB } from "../scripts/harness/os.js";
import { startPeer } from "../scripts/harness/peer.js";
import { BUNDLE, SEA, type Command } from "../scripts/harness/process.js";
import { stat } from "./lib.js";
import { f, range, type Row } from "./report.js";

/**
 * The pinned Node's path, unpacked from its checked tarball in the cache (scripts/pinned-node.mjs), the
 * one the build made the binary from. Never fetched here: without it a figure that needs it fails and
 * says why, rather than measuring against another Node.
 */
export function pinnedNode(): string {
  try {
    return execFileSync(process.execPath, [path.join(ROOT, "scripts/pinned-node.mjs"), "--cached"], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" }, stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch (err) {
    const why = String((err as { stderr?: unknown }).stderr ?? "").trim() || (err as Error).message;
    throw new Error(`no Node the binary embeds to measure against: ${why}`, { cause: err });
  }
}

/** The version a node binary says it is. */
export const versionOf = (node: string): string => execFileSync(node, ["--version"], { encoding: "utf8" }).trim();

/**
 * The resident set of a sidecar started by `command` once it has answered a request and then sat
 * idle: the figure a user sees for a sidecar per worker that has nothing to do yet. Read after a
 * second `stats` round trip 500 ms later, so start-up's transient allocations have been collected.
 */
async function idleRssKiB(command: Command): Promise<number> {
  const p = startPeer({ command, stderr: "ignore", keepFrames: false });
  await p.ok("stats", {});
  await new Promise((r) => setTimeout(r, 500));
  await p.ok("stats", {});
  const kib = statusKiB(p.pid, "VmRSS");
  p.end();
  await p.waitForExit(60_000);
  return kib;
}

export async function idleMemory(row: (r: Row) => void, quick: boolean): Promise<void> {
  const node26 = pinnedNode();
  const old = { name: `node ${process.version} + bundle`, file: process.execPath, args: [BUNDLE] };
  const same = { name: `node ${versionOf(node26)} + bundle`, file: node26, args: [BUNDLE] };
  const rounds = quick ? 3 : 7;
  const xs: number[] = [];
  const ys: number[] = [];
  const zs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    xs.push((await idleRssKiB(SEA)) / 1024);
    ys.push((await idleRssKiB(old)) / 1024);
    zs.push((await idleRssKiB(same)) / 1024);
  }
  const [a, b, c] = [stat(xs), stat(ys), stat(zs)];
  row({
    id: "B8m",
    what: `idle sidecar's resident memory, MiB: the binary (Node ${versionOf(node26).slice(1)}) against the bundle on the runtime before it`,
    ours: range(a),
    reference: `${old.name}: ${range(b)}; ${same.name}: ${range(c)}`,
    ratio: `${f(a.median / b.median, 2)}× (bundle on the new runtime ${f(c.median / b.median, 2)}×)`,
    target: "(reported)",
    met: true,
  });
}
