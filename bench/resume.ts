/**
 * Issue 34's figures for resume through `proxy` (protocol/README.md §16).
 *
 * B19: events per second through `proxy --store memory` and `--store redis://…` against
 * `--store none`, over B9's stream of 100,000 small STATE_DELTA events, read by a client that splits
 * and parses every event. The three proxies run at once, on the same CPU; rounds alternate. A run
 * through the Redis store counts until its client has read the last event and Redis holds the run's
 * end, so that writes the proxy still has queued are not left out of its time.
 *
 * B20: rejoin latency, from sending the rejoin (a new connection, the run's request again with
 * Last-Event-ID) to having read the first replayed event, for a live run of 1,000 events rejoined
 * from its 500th; p50 and p99 of many rejoins, each store, interleaved. Beside it, the same time for a
 * new run's first event through `--store none` (connection, request, upstream, repair).
 *
 * The proxies are the binary, pinned to CPU 1 (run.ts pins the driver to CPU 0); redis-server is a
 * real one, started here on loopback with nothing kept on disk, and not pinned.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Redis } from "ioredis";
import { startRedis, type RunningRedis } from "../scripts/harness/redis.js";
import { cpuMicros } from "../scripts/harness/os.js";
import { SEA, Sidecar } from "../scripts/harness/process.js";
import { makeStream, pinned, readRun } from "./proxy.js";
import { f, note, range, type Row } from "./report.js";
import { stat } from "./lib.js";

export const BODY = (threadId: string): string => JSON.stringify({ threadId, runId: "r", state: { counter: -1 }, messages: [], tools: [], context: [], forwardedProps: {} });

/** A server in this process; `handle` answers each request once its body is read. */
export async function serve(handle: (path: string, body: string, res: http.ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handle((req.url ?? "/").split("?")[0] as string, Buffer.concat(chunks).toString("utf8"), res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Writes `stream` in 16 KiB slices, minding backpressure, then ends. */
export function writeAll(res: http.ServerResponse, stream: Buffer): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  let at = 0;
  const more = (): void => {
    while (at < stream.length) if (!res.write(stream.subarray(at, (at += 16 * 1024)))) return void res.once("drain", more);
    res.end();
  };
  more();
}

export interface Proxy {
  child: Sidecar;
  url: string;
}

/** The binary's proxy with `args`, on CPU 1. */
export async function proxyWith(upstream: string, args: string[], env: Record<string, string> = {}): Promise<Proxy> {
  const child = new Sidecar({ command: pinned(SEA), args: ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--log-level", "warn", ...args], env, stderr: "ignore" });
  await child.until(() => /listening on \S+\n/.test(child.stdout.toString("utf8")), "the proxy's listening line", 60_000);
  return { child, url: /listening on (\S+)/.exec(child.stdout.toString("utf8"))?.[1] ?? "" };
}

export async function stop(child: { kill(signal?: NodeJS.Signals): void; waitForExit(ms?: number): Promise<unknown> }): Promise<void> {
  child.kill("SIGTERM");
  await child.waitForExit(60_000).catch(() => child.kill());
}

/** A redis-server of the bench's own; its client; and a stop that ends both. */
export async function redisForBench(): Promise<{ server: RunningRedis; client: Redis; close(): Promise<void> }> {
  const server = await startRedis();
  const client = new Redis(server.url, { lazyConnect: true });
  await client.connect();
  return {
    server,
    client,
    close: async () => {
      await client.quit().catch(() => undefined);
      await stop(server.child);
    },
  };
}

/** Resolves once Redis holds the end of the thread's latest run at `path` (the proxy has written all of it). */
export async function redisHoldsEnd(client: Redis, threadId: string, path: string): Promise<void> {
  for (;;) {
    const run = await client.get(`agui-state:thread:${path}\0${threadId}`);
    if (run !== null) {
      const last = await client.xrevrange(`agui-state:run:${run}:events`, "+", "-", "COUNT", 1);
      if (last[0]?.[1][0] === "end") return;
    }
    await new Promise((r) => setTimeout(r, 2));
  }
}

export async function resumeThroughput(row: (r: Row) => void, quick: boolean): Promise<void> {
  const stream = makeStream();
  const events = stream.toString("utf8").split("\n\n").length - 1;
  const upstream = await serve((_path, _body, res) => writeAll(res, stream));
  const redis = await redisForBench();
  const none = await proxyWith(upstream.url, ["--store", "none"]);
  const memory = await proxyWith(upstream.url, ["--store", "memory"]);
  const onRedis = await proxyWith(upstream.url, ["--store", redis.server.url]);
  try {
    const timed = async (p: Proxy, redisToo: boolean): Promise<{ perSecond: number; clientPerSecond: number }> => {
      const t0 = performance.now();
      const r = await readRun(p.url);
      if (r.events !== events) throw new Error(`B19: the proxy passed ${r.events} events of ${events}`);
      if (redisToo) await redisHoldsEnd(redis.client, "t", "/");
      return { perSecond: events / ((performance.now() - t0) / 1000), clientPerSecond: r.perSecond };
    };
    // A warm-up of each.
    await timed(none, false);
    await timed(memory, false);
    await timed(onRedis, true);
    const xs = { none: [] as number[], memory: [] as number[], redis: [] as number[], redisClient: [] as number[] };
    // CPU time of each process over the measured rounds, from /proc.
    const cpu = { none: 0, memory: 0, redis: 0, server: 0 };
    const charged = async <T>(pids: [keyof typeof cpu, number][], fn: () => Promise<T>): Promise<T> => {
      const before = pids.map(([, pid]) => cpuMicros(pid));
      const out = await fn();
      pids.forEach(([k, pid], i) => (cpu[k] += cpuMicros(pid) - (before[i] as number)));
      return out;
    };
    const rounds = quick ? 3 : 9;
    for (let i = 0; i < rounds; i++) {
      xs.none.push((await charged([["none", none.child.pid]], () => timed(none, false))).perSecond);
      xs.memory.push((await charged([["memory", memory.child.pid]], () => timed(memory, false))).perSecond);
      const r = await charged([["redis", onRedis.child.pid], ["server", redis.server.child.pid]], () => timed(onRedis, true));
      xs.redis.push(r.perSecond);
      xs.redisClient.push(r.clientPerSecond);
    }
    const per = (us: number) => f(us / (rounds * events), 2);
    note(`B19: CPU µs per event over the rounds: the proxy ${per(cpu.none)} with --store none, ${per(cpu.memory)} with memory, ${per(cpu.redis)} with Redis, and redis-server ${per(cpu.server)}.`);
    const [n, m, r, rc] = [stat(xs.none), stat(xs.memory), stat(xs.redis), stat(xs.redisClient)];
    const what = (store: string) => `events/s through \`proxy --store ${store}\`, B9's stream of ${f(events - 2, 0)} small STATE_DELTA events`;
    row({ id: "B19", what: what("memory"), ours: range(m, 0), reference: `--store none: ${range(n, 0)}`, ratio: f(m.median / n.median, 2), target: "≥ 0.9 of none", met: m.median / n.median >= 0.9 });
    row({ id: "B19r", what: `${what("redis://…")}, until Redis holds the run's end`, ours: range(r, 0), reference: `--store none: ${range(n, 0)}`, ratio: f(r.median / n.median, 2), target: "≥ 0.5 of none", met: r.median / n.median >= 0.5 });
    note(`B19r: the Redis proxy's client alone read ${range(rc, 0)} events/s (${f(rc.median / n.median, 2)} of none): the rest of its time is Redis catching up with the writes.`);
  } finally {
    for (const p of [none, memory, onRedis]) await stop(p.child);
    await redis.close();
    await upstream.close();
  }
}

/** A run of 1,000 small events that stays open: what a rejoin finds live. */
function liveEvents(): string {
  const parts = ['data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'];
  for (let i = 0; i < 999; i++) parts.push(`data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/counter","value":${i}}]}\n\n`);
  return parts.join("");
}

/** Sends `body` to `url` with `headers` on a new connection; resolves with the ms until the first whole event was read, then hangs up. */
function firstEvent(url: string, body: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(url, { method: "POST", agent: false, headers: { "content-type": "application/json", accept: "text/event-stream", ...headers } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`B20: status ${res.statusCode} from ${url}`));
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
        if (!text.includes("\n\n")) return;
        resolve(performance.now() - t0);
        req.destroy();
      });
      res.on("error", () => undefined);
    });
    req.on("error", (e) => reject(e));
    req.end(body);
  });
}

/** Starts a live run through `proxy` and reads its first 1,000 events; resolves with their ids and the open request. */
async function liveRun(proxy: string, threadId: string): Promise<{ ids: string[]; req: http.ClientRequest }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${proxy}/live`, { method: "POST", agent: false, headers: { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
        // The events' ids, not the opening block's (number 0, protocol/README.md §16).
        const ids = [...text.matchAll(/^id: (\S+\.[1-9][0-9]*\.\S+)$/gm)].map((m) => m[1] as string);
        if (ids.length >= 1000) resolve({ ids, req });
      });
      res.on("error", () => undefined);
    });
    req.on("error", reject);
    req.end(BODY(threadId));
  });
}

const quantile = (xs: number[], q: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number;
};

export async function rejoinLatency(row: (r: Row) => void, quick: boolean): Promise<void> {
  const live = Buffer.from(liveEvents());
  const held: http.ServerResponse[] = [];
  const upstream = await serve((path, _body, res) => {
    if (path === "/live") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(live);
      held.push(res);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end('data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\ndata: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n');
  });
  const redis = await redisForBench();
  const none = await proxyWith(upstream.url, ["--store", "none"]);
  const memory = await proxyWith(upstream.url, ["--store", "memory", "--detach-grace", "600"]);
  const onRedis = await proxyWith(upstream.url, ["--store", redis.server.url, "--detach-grace", "600"]);
  const runs: http.ClientRequest[] = [];
  try {
    const m = await liveRun(memory.url, "lm");
    const r = await liveRun(onRedis.url, "lr");
    runs.push(m.req, r.req);
    const rejoin = (p: Proxy, threadId: string, ids: string[]) => () => firstEvent(`${p.url}/live`, BODY(threadId), { "last-event-id": ids[499] as string });
    const fresh = () => firstEvent(`${none.url}/fresh`, BODY("f"), {});
    const kinds = { memory: rejoin(memory, "lm", m.ids), redis: rejoin(onRedis, "lr", r.ids), fresh };
    const samples = { memory: [] as number[], redis: [] as number[], fresh: [] as number[] };
    for (let i = 0; i < 20; i++) for (const k of Object.values(kinds)) await k();
    for (let i = 0; i < (quick ? 100 : 400); i++) for (const [k, fn] of Object.entries(kinds)) samples[k as keyof typeof samples].push(await fn());
    const p = (xs: number[]) => `p50 ${f(quantile(xs, 0.5), 2)}, p99 ${f(quantile(xs, 0.99), 2)}`;
    const ref = `a new run's first event, --store none: ${p(samples.fresh)} ms`;
    for (const store of ["memory", "redis"] as const) {
      const p99 = quantile(samples[store], 0.99);
      row({
        id: store === "memory" ? "B20" : "B20r",
        what: `rejoin latency, --store ${store === "memory" ? "memory" : "redis://…"}: the rejoin sent to its first replayed event read, ms (a live run of 1,000 events, from its 500th; ${f(samples[store].length, 0)} rejoins)`,
        ours: `${p(samples[store])} ms`,
        reference: ref,
        ratio: `p99 ${f(p99 / quantile(samples.fresh, 0.99), 2)}× the new run's`,
        target: "p99 ≤ 50 ms",
        met: p99 <= 50,
      });
    }
  } finally {
    for (const q of runs) q.destroy();
    for (const res of held) res.destroy();
    for (const x of [none, memory, onRedis]) await stop(x.child);
    await redis.close();
    await upstream.close();
  }
}
