import { createLogger, divertConsole, type Log, type LogLevel } from "../log.js";
import type { Policy } from "../stream/client.js";
// Types only, erased from the bundle: the inspector is loaded only with --inspect.
import type { InspectServer } from "../inspect/server.js";
import type { Caps, Inspector } from "../inspect/store.js";
import { openRunLog, type ResumeFlags } from "../resume/open.js";
import { ProxyServer } from "./server.js";

/**
 * What `agui-state proxy` was asked to do. Defined here, beside what runs it,
 * so the proxy depends on nothing above it; src/cli/proxy.ts parses the flags
 * into it.
 */
export interface ProxyOptions {
  upstream: URL;
  host: string;
  port: number;
  logLevel: LogLevel;
  /** How long SIGTERM waits for open streams before closing them, in ms. */
  graceMs: number;
  /** The repair policy every event stream is fixed with (--own, --snapshots, --join-keys). */
  policy: Policy;
  /** --max-request-body: the request body kept for its RunAgentInput (protocol/README.md §14). */
  maxRequestBody: number;
  /** --inspect: the inspector's own listener, its token, and what it keeps (issue 25); absent, there is none. */
  inspect?: InspectOptions;
  /** --store and the other resume flags (protocol/README.md §16); absent (`--store none`), no resume. */
  resume?: ResumeFlags;
}

export interface InspectOptions {
  host: string;
  port: number;
  token: string | undefined;
  caps: Caps;
}

/** How the bound address is written in the one stdout line: IPv6 in brackets. */
export function listeningLine(address: string, port: number): string {
  return `listening on http://${address.includes(":") ? `[${address}]` : address}:${port}\n`;
}

/**
 * Runs `agui-state proxy` until SIGTERM/SIGINT: stdout gets exactly one line
 * once the port is bound (with --inspect, the inspector's line before it),
 * logs go to stderr. Exits 0 after a signal (open
 * streams finished or cut at the grace period), 1 if it cannot listen.
 */
export async function runProxy(options: ProxyOptions): Promise<void> {
  const log = createLogger(options.logLevel);
  // Stray console output from a dependency must never add a second stdout line.
  divertConsole(log);
  const exit = (code: number) => {
    process.exitCode = code;
    // As in serve: let the log writer empty and the loop end on its own; the
    // unref'd timer exits anyway if stderr is never read.
    void log.settle().then(() => setTimeout(() => process.exit(code), 3000).unref());
  };
  const inspecting = options.inspect ? await startInspector(options.inspect, log) : undefined;
  if (inspecting === null) return exit(2);
  const resume = options.resume && (await openRunLog(options.resume, log));
  if (resume === null) return exit(2);
  const proxy = new ProxyServer({ upstream: options.upstream, log, policy: options.policy, maxRequestBody: options.maxRequestBody, ...(inspecting ? { watcher: inspecting.inspector } : {}), ...(resume ? { resume } : {}) });
  let stopping = false;
  // Handlers before the "listening" line: a parent that takes the line as its
  // cue and signals at once must find them in place.
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      if (stopping) return;
      stopping = true;
      const inFlight = proxy.inFlight;
      // shutdown() stops accepting at once, before this record can reach
      // stderr: whoever reads the record may count on the port being closed.
      const done = proxy.shutdown(options.graceMs).then(async (r) => (await inspecting?.server.close(), r));
      log.info({ signal, inFlight, graceMs: options.graceMs }, "stopping: no new connections; letting open streams finish");
      void done.then(({ drained, cut }) => {
        if (drained) log.info("every open stream finished; exiting");
        else log.warn({ cut }, "grace period over; cut off the streams still open");
        exit(0);
      });
    });
  }
  try {
    const { address, port } = await proxy.listen(options.host, options.port);
    // With --inspect, the inspector's line comes first: whoever waits for "listening on" has both.
    process.stdout.write((inspecting ? inspecting.line : "") + listeningLine(address, port));
    log.info({ address, port, upstream: options.upstream.href }, "proxy listening");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    process.stderr.write(`agui-state: cannot listen on ${options.host}:${options.port}: ${err.message}\n`);
    void inspecting?.server.close();
    // Exit 2, as for input that cannot be used (src/cli/exit.ts): the --listen address cannot be.
    exit(2);
  }
}

/**
 * The inspector's listener, bound before the proxy's; null (after one line on
 * stderr) when it cannot bind. Loaded here only: without --inspect the proxy
 * never loads it, and its pipeline has no observer.
 */
async function startInspector(options: InspectOptions, log: Log): Promise<{ inspector: Inspector; server: InspectServer; line: string } | null> {
  const [{ Inspector }, { InspectServer }] = await Promise.all([import("../inspect/store.js"), import("../inspect/server.js")]);
  const inspector = new Inspector(options.caps);
  const server = new InspectServer({ inspector, log, ...(options.token !== undefined ? { token: options.token } : {}) });
  try {
    const { address, port } = await server.listen(options.host, options.port);
    log.info({ address, port, caps: options.caps, token: options.token !== undefined }, "inspector listening");
    return { inspector, server, line: `inspector on http://${address.includes(":") ? `[${address}]` : address}:${port}/\n` };
  } catch (e) {
    process.stderr.write(`agui-state: cannot listen on ${options.host}:${options.port} (--inspect): ${(e as Error).message}\n`);
    return null;
  }
}
