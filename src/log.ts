import { format } from "node:util";
import type { Logger, LogFn } from "pino";
import { StderrSink } from "./log-sink.js";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What the server logs through: a pino logger, or the lazy one below. */
export type Log = Pick<Logger, "isLevelEnabled" | "debug" | "info" | "warn" | "error">;

const RANK: Record<LogLevel, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Infinity };

export interface LazyLog extends Log {
  /** Resolves once every record so far has been handed to pino. */
  settle(): Promise<void>;
}

/**
 * Logs go to fd 2 as pino JSON lines; stdout belongs to the protocol.
 * - StderrSink writes asynchronously and drops lines past 16 MiB of backlog,
 *   so a parent that never reads stderr cannot stall the sidecar, nor keep it
 *   from exiting.
 * - No pino transports: their worker threads cannot load inside a single binary.
 * - pino is loaded on the first record at or above the level, not at start:
 *   at the default level a healthy sidecar logs nothing, and loading pino
 *   would add several milliseconds to every start. Records logged while it
 *   loads are queued and written in order.
 */
export function createLogger(level: LogLevel): LazyLog {
  const threshold = RANK[level];
  let real: Logger | undefined;
  let loading: Promise<void> | undefined;
  const queue: [keyof Log, unknown[]][] = [];
  const load = (): Promise<void> =>
    (loading ??= import("pino").then(({ default: pino }) => {
      real = pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, new StderrSink());
      for (const [method, args] of queue.splice(0)) (real[method] as (...a: unknown[]) => void)(...args);
    }));
  const at = (method: "debug" | "info" | "warn" | "error") =>
    ((...args: unknown[]) => {
      if (RANK[method] < threshold) return;
      if (real) (real[method] as (...a: unknown[]) => void)(...args);
      else {
        queue.push([method, args]);
        void load();
      }
    }) as LogFn;
  return {
    isLevelEnabled: (l: string) => (RANK[l as LogLevel] ?? Infinity) >= threshold,
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    settle: () => loading ?? Promise.resolve(),
  };
}

/**
 * Sends any stray console output (from a dependency, say) to the logger, so
 * nothing but protocol frames can ever reach stdout.
 */
export function divertConsole(log: Log): void {
  /* eslint-disable no-console -- replacing console's methods is what keeps stray output off stdout */
  const to = (level: "info" | "warn" | "error" | "debug") => (...args: unknown[]) => log[level]({ console: true }, format(...args));
  console.log = to("info");
  console.info = to("info");
  console.debug = to("debug");
  console.trace = to("debug");
  console.warn = to("warn");
  console.error = to("error");
  console.dir = (obj: unknown) => log.info({ console: true }, format(obj));
  console.table = (obj: unknown) => log.info({ console: true }, format(obj));
  /* eslint-enable no-console */
}
