import { createLogger, divertConsole, type LogLevel } from "../log.js";
import type { Policy } from "../stream/client.js";
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
}

/** How the bound address is written in the one stdout line: IPv6 in brackets. */
export function listeningLine(address: string, port: number): string {
  return `listening on http://${address.includes(":") ? `[${address}]` : address}:${port}\n`;
}

/**
 * Runs `agui-state proxy` until SIGTERM/SIGINT: stdout gets exactly one line
 * once the port is bound, logs go to stderr. Exits 0 after a signal (open
 * streams finished or cut at the grace period), 1 if it cannot listen.
 */
export async function runProxy(options: ProxyOptions): Promise<void> {
  const log = createLogger(options.logLevel);
  // Stray console output from a dependency must never add a second stdout line.
  divertConsole(log);
  const proxy = new ProxyServer({ upstream: options.upstream, log, policy: options.policy });
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
      const done = proxy.shutdown(options.graceMs);
      log.info({ signal, inFlight, graceMs: options.graceMs }, "stopping: no new connections; letting open streams finish");
      void done.then(({ drained, cut }) => {
        if (drained) log.info("every open stream finished; exiting");
        else log.warn({ cut }, "grace period over; cut off the streams still open");
        exit(0);
      });
    });
  }
  const exit = (code: number) => {
    process.exitCode = code;
    // As in serve: let the log writer empty and the loop end on its own; the
    // unref'd timer exits anyway if stderr is never read.
    void log.settle().then(() => setTimeout(() => process.exit(code), 3000).unref());
  };
  try {
    const { address, port } = await proxy.listen(options.host, options.port);
    process.stdout.write(listeningLine(address, port));
    log.info({ address, port, upstream: options.upstream.href }, "proxy listening");
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    process.stderr.write(`agui-state: cannot listen on ${options.host}:${options.port}: ${err.message}\n`);
    // Exit 2, as for input that cannot be used (src/cli/exit.ts): the --listen address cannot be.
    exit(2);
  }
}
