import pkg from "../../package.json" with { type: "json" };
import { createLogger, divertConsole } from "../log.js";
import { openRunLog } from "../resume/open.js";
import type { ListenAddress } from "../rpc/node/listen-address.js";
import { startServer } from "../rpc/node/server.js";
import { listenForSessions, type SocketServerOptions } from "../rpc/node/socket-server.js";
import { effectiveCeiling, HeapCeiling, v8Heap } from "../runtime/heap-ceiling.js";
import { tuneHeap } from "../runtime/heap-tuning.js";
import { StateService } from "../service/state-service.js";
import { StreamService } from "../service/stream-service.js";
import type { ServeOptions } from "./options.js";
import { EXIT } from "./exit.js";
import { lazyPipeline } from "./stream-pipeline.js";

/**
 * `agui-state [serve]`: runs the sidecar on stdin/stdout until stdin ends, a
 * signal arrives, or the parent closes stdout; then exits 0. Each reply is
 * written as its message is handled (or, for a method that answers later,
 * when it settles), so when `done` resolves nothing is left to answer. With a
 * redis:// store, serving starts once Redis answers; when it cannot be reached,
 * one line on stderr and exit status 2.
 */
export async function serveCommand(options: ServeOptions): Promise<void> {
  const log = createLogger(options.logLevel);
  divertConsole(log);
  const resume = options.resume && (await openRunLog(options.resume, log));
  if (resume === null) {
    process.exitCode = 2;
    return;
  }
  const tuning = tuneHeap();
  const asked = options.limits.maxHeapBytes;
  const { ceiling, clamped } = effectiveCeiling(asked);
  const limits = { ...options.limits, maxHeapBytes: ceiling };
  const service = new StateService({ limits, version: pkg.version, ownsInput: true, sharesResults: true });
  const streams = new StreamService({ limits, maxRequestBody: options.maxRequestBody, pipeline: lazyPipeline(), log, ...(resume ? { resume } : {}) });
  const probe = tuning.watch(v8Heap());
  const heap = new HeapCeiling(ceiling, probe, service, log, probe.used(), streams, resume?.log);
  if (clamped) log.warn({ asked, maxHeapBytes: ceiling }, "--max-heap is above 80% of V8's own heap limit; using that instead");
  const shared = { framing: options.framing, service, streams, log, afterChunk: () => heap.check(), onMessage: (chars: number) => tuning.message(chars) };
  if (options.listen) return serveSocket(options.listen, { ...shared, ...(options.exitIdleMs !== undefined ? { exitIdleMs: options.exitIdleMs } : {}) }, log);
  const server = startServer({ input: process.stdin, output: process.stdout, ...shared });
  // Handlers first, then the "serving" line: a parent may take that line as
  // its cue, and a signal must never find the process without its handler.
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      log.info({ signal }, "stopping: answering what was read, then exiting");
      server.stop();
    });
  }
  log.debug({ limits: options.limits, framing: options.framing }, "serving");
  void server.done.then((why) => {
    log.debug({ why, requests: server.requests }, "exiting");
    process.stdin.destroy();
    // The run log's connections (Redis) would hold the event loop open.
    void streams.close();
    // No process.exit() at once: the event loop empties when the log writer
    // has written its last records, in order, and the process exits 0 on its
    // own. If the parent is not reading stderr, the writer would wait for it
    // forever: after 3 s the unref'd timer exits anyway, and the log records
    // still queued are lost (the parent got a prefix of the log, no holes).
    process.exitCode = 0;
    void log.settle().then(() => setTimeout(() => process.exit(0), 3000).unref());
  });
}

/**
 * `serve --listen` (protocol/README.md §2): the one sidecar of a host, whose workers connect to it.
 * stdin is not read; stdout carries one line, "listening on ADDRESS", once connections are taken.
 * A signal stops it: each connection answers what it read, the socket is removed, and it exits 0.
 * When it cannot listen, one line on stderr and exit 2, as the proxy does; when a live sidecar
 * already serves the socket, exit 3, so that a worker that started it can tell "another worker's
 * start won" (connect to it) from "my flags were refused".
 */
async function serveSocket(address: ListenAddress, shared: Omit<SocketServerOptions, "address">, log: ReturnType<typeof createLogger>): Promise<void> {
  const { streams } = shared;
  const server = await listenForSessions({ address, ...shared });
  if ("problem" in server) {
    // As the proxy says it (src/proxy/main.ts): one plain line, for whoever started it.
    process.stderr.write(`agui-state: ${server.problem}\n`);
    process.exitCode = server.served ? EXIT.served : EXIT.refused;
    void streams.close();
    await log.settle();
    return;
  }
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      log.info({ signal, connections: server.connections }, "stopping: each connection answers what it read, then exiting");
      server.stop();
    });
  }
  process.stdout.write(`listening on ${server.address}\n`);
  log.info({ address: server.address }, "serving connections");
  await server.done;
  await streams.close();
  process.exitCode = 0;
  void log.settle().then(() => setTimeout(() => process.exit(0), 3000).unref());
}
