import { format } from "node:util";
import pino, { type Logger } from "pino";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Logs go to fd 2 as pino JSON lines; stdout belongs to the protocol. The
 * destination writes asynchronously and drops lines past 16 MiB of backlog,
 * so a parent that never reads stderr cannot stall the sidecar. No pino
 * transports: their worker threads cannot load inside a single binary.
 */
export function createLogger(level: LogLevel): Logger {
  const dest = pino.destination({ dest: 2, sync: false, maxLength: 16 * 1024 * 1024 });
  return pino({ level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/**
 * Sends any stray console output (from a dependency, say) to the logger, so
 * nothing but protocol frames can ever reach stdout.
 */
export function divertConsole(log: Logger): void {
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
