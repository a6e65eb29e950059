/**
 * B9: events per second through `agui-state proxy` against the same upstream
 * read directly. The upstream (node:http, in this process) answers with one
 * prebuilt stream of 100,000 small STATE_DELTA events, written in 16 KiB
 * slices so that it is never the bottleneck; the client (node:http, also in
 * this process) reads the whole body and parses every event. Both ways
 * alternate, round by round. A note gives StreamFixer's own rate in process,
 * which bounds the proxy's.
 */
import { spawnSync } from "node:child_process";
import http from "node:http";
import { cpus } from "node:os";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { SEA, Sidecar, type Command } from "../scripts/harness/process.js";
import { alternate, stat } from "./lib.js";
import type { StreamFixer as Fixer } from "../src/stream/fixer.js";
import { f, note, range, type Row } from "./report.js";

const EVENTS = 100_000;
const SLICE = 16 * 1024;

/** RUN_STARTED, EVENTS deltas that each apply to the mirror as sent, RUN_FINISHED. */
export function makeStream(): Buffer {
  const parts = ['data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'];
  for (let i = 0; i < EVENTS; i++) parts.push(`data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/counter","value":${i}}]}\n\n`);
  parts.push('data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n');
  return Buffer.from(parts.join(""), "utf8");
}

const BODY = JSON.stringify({ threadId: "t", runId: "r", state: { counter: -1 }, messages: [], tools: [], context: [], forwardedProps: {} });

/**
 * Reads one run's whole answer as any AG-UI client must, at the least: the
 * SSE framing split into events and each event's data JSON-parsed. Resolves
 * with events per second and the number of events read.
 */
export function readRun(url: string): Promise<{ perSecond: number; events: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" } }, (res) => {
      const decoder = new TextDecoder();
      let rest = "";
      let events = 0;
      const take = (text: string): void => {
        const blocks = (rest + text).split("\n\n");
        rest = blocks.pop() ?? "";
        for (const block of blocks) {
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data !== "") {
            JSON.parse(data);
            events++;
          }
        }
      };
      res.on("data", (chunk: Buffer) => take(decoder.decode(chunk, { stream: true })));
      res.on("end", () => {
        take(decoder.decode() + "\n\n");
        resolve({ perSecond: events / ((performance.now() - t0) / 1000), events });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(BODY);
  });
}

/** StreamFixer alone, in this process, over the same bytes: what bounds the proxy. */
function fixerAlone(StreamFixer: typeof Fixer, stream: Buffer): number {
  const t0 = performance.now();
  const fixer = new StreamFixer({ state: { counter: -1 } });
  for (let at = 0; at < stream.length; at += 64 * 1024) fixer.push(stream.subarray(at, at + 64 * 1024));
  fixer.end();
  return (EVENTS + 2) / ((performance.now() - t0) / 1000);
}

/** The process under test on CPU 1 when the machine has two and taskset: run.ts pins the driver to CPU 0, and children inherit it. */
export function pinned(cmd: Command): Command {
  const can = cpus().length >= 2 && spawnSync("taskset", ["-c", "1", "true"], { stdio: "ignore" }).status === 0;
  return can ? { name: cmd.name, file: "taskset", args: ["-c", "1", cmd.file, ...cmd.args] } : cmd;
}

/** `command`: the binary by default; another build of the same CLI for a comparison. */
export async function proxyThroughput(row: (r: Row) => void, quick: boolean, command: Command = SEA): Promise<void> {
  const stream = makeStream();
  const upstream = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let at = 0;
      const more = (): void => {
        while (at < stream.length) {
          const ok = res.write(stream.subarray(at, (at += SLICE)));
          if (!ok) return void res.once("drain", more);
        }
        res.end();
      };
      more();
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const direct = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const proxy = new Sidecar({ command: pinned(command), args: ["proxy", "--upstream", direct, "--listen", "127.0.0.1:0", "--log-level", "warn"], stderr: "ignore" });
  // B9l: the same proxy with lifecycle repair on (issue 40), which the stream, a whole run, never needs: its cost alone.
  const repairing = new Sidecar({ command: pinned(command), args: ["proxy", "--upstream", direct, "--listen", "127.0.0.1:0", "--log-level", "warn", "--lifecycle", "repair"], stderr: "ignore" });
  try {
    await proxy.until(() => proxy.stdout.includes("\n"), "the proxy's listening line", 60_000);
    const via = /listening on (\S+)/.exec(proxy.stdout.toString("utf8"))?.[1] ?? "";
    // A warm-up of each, and a check that the proxy passed every event on.
    const check = await readRun(via);
    await readRun(direct);
    if (check.events !== EVENTS + 2) throw new Error(`B9: the proxy passed ${check.events} events of ${EVENTS + 2}`);
    const [ours, ref] = await alternate(
      quick ? 3 : 9,
      async () => (await readRun(via)).perSecond,
      async () => (await readRun(direct)).perSecond,
    );
    const ratio = ours.median / ref.median;
    row({
      id: "B9",
      what: `events/s through \`proxy\`, one stream of ${f(EVENTS, 0)} small STATE_DELTA events, read by a client that parses each one`,
      ours: range(ours, 0),
      reference: `upstream read directly: ${range(ref, 0)}`,
      ratio: f(ratio, 2),
      target: "≥ 0.5 of direct",
      met: ratio >= 0.5,
    });
    await repairing.until(() => repairing.stdout.includes("\n"), "the repairing proxy's listening line", 60_000);
    const viaRepair = /listening on (\S+)/.exec(repairing.stdout.toString("utf8"))?.[1] ?? "";
    if ((await readRun(viaRepair)).events !== EVENTS + 2) throw new Error("B9l: the repairing proxy did not pass every event on");
    const [mended, direct2] = await alternate(
      quick ? 3 : 9,
      async () => (await readRun(viaRepair)).perSecond,
      async () => (await readRun(direct)).perSecond,
    );
    const ratio2 = mended.median / direct2.median;
    row({
      id: "B9l",
      what: `events/s through \`proxy --lifecycle repair\`, B9's stream`,
      ours: range(mended, 0),
      reference: `upstream read directly: ${range(direct2, 0)}`,
      ratio: f(ratio2, 2),
      target: "≥ 0.5 of direct",
      met: ratio2 >= 0.5,
    });
    // Loaded here, not at the top: only B9 needs the fixer in this process.
    const { StreamFixer } = await import("../src/stream/fixer.js");
    const alone = stat(Array.from({ length: quick ? 3 : 9 }, () => fixerAlone(StreamFixer, stream)));
    note(`B9: StreamFixer alone, in process, over the same stream: ${range(alone, 0)} events/s.`);
  } finally {
    proxy.kill("SIGTERM");
    repairing.kill("SIGTERM");
    await proxy.waitForExit(60_000).catch(() => proxy.kill());
    await repairing.waitForExit(60_000).catch(() => repairing.kill());
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  }
}
