import { parseArgs } from "node:util";
import { LOG_LEVELS, type LogLevel } from "../log.js";
import { DEFAULT_LIMITS } from "../protocol/limits.js";
import type { Limits } from "../protocol/types.js";
import type { ResumeFlags } from "../resume/open.js";
import type { Framing } from "../rpc/node/stdio.js";
import { RESUME_OPTIONS, resumeFlags } from "./resume-flags.js";
import { UsageError } from "./usage-error.js";

/** The options of the serve command, from its flags and environment variables. */
export interface ServeOptions {
  framing: Framing;
  logLevel: LogLevel;
  limits: Limits;
  /** --store and the other resume flags (protocol/README.md §16.x); absent (`--store none`), no run log. */
  resume?: ResumeFlags;
}

/** Each limit's flag and environment variable (protocol/README.md §7). A flag wins over its variable. */
export const LIMIT_FLAGS: readonly { key: keyof Limits; flag: string; env: string; min: number }[] = [
  { key: "maxMessageBytes", flag: "max-message-bytes", env: "AGUI_STATE_MAX_MESSAGE_BYTES", min: 64 },
  { key: "maxOps", flag: "max-ops", env: "AGUI_STATE_MAX_OPS", min: 1 },
  { key: "maxDepth", flag: "max-depth", env: "AGUI_STATE_MAX_DEPTH", min: 1 },
  { key: "maxStateBytes", flag: "max-state-bytes", env: "AGUI_STATE_MAX_STATE_BYTES", min: 2 },
  { key: "maxThreads", flag: "max-threads", env: "AGUI_STATE_MAX_THREADS", min: 1 },
  { key: "maxHeapBytes", flag: "max-heap", env: "AGUI_STATE_MAX_HEAP", min: 32 * 1024 * 1024 },
  { key: "maxStreams", flag: "max-streams", env: "AGUI_STATE_MAX_STREAMS", min: 1 },
  { key: "streamIdleMs", flag: "stream-idle-ms", env: "AGUI_STATE_STREAM_IDLE_MS", min: 1 },
];

export const SERVE_FLAGS = {
  framing: { type: "string" },
  "log-level": { type: "string" },
  ...Object.fromEntries(LIMIT_FLAGS.map((l) => [l.flag, { type: "string" }])),
  ...RESUME_OPTIONS,
} as const;

export { UsageError };

/** Accepts plain integers, with an optional KiB/MiB/GiB suffix for byte sizes (e.g. 64MiB). */
function parseCount(text: string, what: string, min: number): number {
  const m = /^(\d+)(KiB|MiB|GiB)?$/.exec(text.trim());
  const unit = m?.[2] === "KiB" ? 1024 : m?.[2] === "MiB" ? 1024 ** 2 : m?.[2] === "GiB" ? 1024 ** 3 : 1;
  const n = m ? Number(m[1]) * unit : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${what}: expected an integer >= ${min}, got ${JSON.stringify(text)}`);
  return n;
}

/** Reads the serve flags and their environment variables. Throws UsageError on a bad value. */
export function serveOptions(values: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv): ServeOptions {
  const framing = String(values["framing"] ?? "auto");
  if (framing !== "auto" && framing !== "ndjson" && framing !== "lsp") throw new UsageError(`--framing: expected auto, ndjson or lsp, got ${JSON.stringify(framing)}`);
  const level = String(values["log-level"] ?? env["AGUI_STATE_LOG_LEVEL"] ?? "info");
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new UsageError(`--log-level: expected one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(level)}`);
  const limits: Limits = { ...DEFAULT_LIMITS };
  for (const l of LIMIT_FLAGS) {
    const flag = values[l.flag];
    if (typeof flag === "string") limits[l.key] = parseCount(flag, `--${l.flag}`, l.min);
    else if (env[l.env] !== undefined && env[l.env] !== "") limits[l.key] = parseCount(env[l.env] as string, l.env, l.min);
  }
  const resume = resumeFlags(values, env);
  return { framing, logLevel: level as LogLevel, limits, ...(resume ? { resume } : {}) };
}

export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv): ServeOptions {
  try {
    const { values } = parseArgs({ args: argv, options: SERVE_FLAGS, strict: true, allowPositionals: false });
    return serveOptions(values, env);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError((e as Error).message);
  }
}
