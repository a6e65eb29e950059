import { parseArgs, type ParseArgsConfig } from "node:util";
import { escapeHidden, showText } from "../json/show.js";
import { LOG_LEVELS, type LogLevel } from "../log.js";
import { DEFAULT_LIMITS } from "../protocol/limits.js";
import type { Limits } from "../protocol/types.js";
import type { ResumeFlags } from "../resume/open.js";
import { parseListenAddress, type ListenAddress } from "../rpc/node/listen-address.js";
import type { Framing } from "../rpc/node/stdio.js";
import { EDGE_OPTIONS, maxRequestBody } from "./edge-flags.js";
import { RESUME_OPTIONS, resumeFlags } from "./resume-flags.js";
import { UsageError } from "./usage-error.js";

/** The options of the serve command, from its flags and environment variables. */
export interface ServeOptions {
  framing: Framing;
  logLevel: LogLevel;
  limits: Limits;
  /** --store and the other resume flags (protocol/README.md §16); absent (`--store none`), no run log. */
  resume?: ResumeFlags;
  /** --max-request-body: the request body a middleware keeps for openStream (protocol/README.md §14). */
  maxRequestBody: number;
  /** --listen: serve connections there, shared by every worker on the host, instead of stdin/stdout (§2). */
  listen?: ListenAddress;
  /** --exit-idle MS, with --listen: stop once no connection has been open that long (a sidecar a worker started). */
  exitIdleMs?: number;
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
  listen: { type: "string" },
  "exit-idle": { type: "string" },
  "log-level": { type: "string" },
  ...Object.fromEntries(LIMIT_FLAGS.map((l) => [l.flag, { type: "string" }])),
  ...RESUME_OPTIONS,
  ...EDGE_OPTIONS,
} as const;

export { UsageError };

/** `-h` or `--help` among a command's flags: its help is printed, and it exits 0. */
export class HelpWanted extends UsageError {}

type FlagOptions = NonNullable<ParseArgsConfig["options"]>;
export type FlagValues = Record<string, string | boolean | string[] | undefined>;

/**
 * The one reader of every command's flags (node:util parseArgs, strict):
 * - a flag the command does not know is a usage error, never an argument:
 *   `escape --bogus` exits 2 rather than printing "/--bogus";
 * - `--` ends the flags: every argument after it is one, even "-x";
 * - `-h` and `--help`, anywhere before `--`, ask for the command's help.
 * A lone "-" is an argument (stdin, or the segment "-").
 */
export function parseFlags(command: string, argv: string[], options: FlagOptions, takesArguments = true): { values: FlagValues; positionals: string[] } {
  let parsed: { values: FlagValues; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: "boolean", short: "h" } }, strict: true, allowPositionals: takesArguments }) as { values: FlagValues; positionals: string[] };
  } catch (e) {
    throw new UsageError(`${command}: ${flagProblem(e as Error & { code?: string }, takesArguments)}`);
  }
  if (parsed.values["help"] === true) throw new HelpWanted(command);
  return parsed;
}

/** parseArgs's complaint in one line, the argument it is about shown escaped. */
function flagProblem(e: Error & { code?: string }, takesArguments: boolean): string {
  const quoted = /'([^']*)'/.exec(e.message)?.[1] ?? "";
  switch (e.code) {
    case "ERR_PARSE_ARGS_UNKNOWN_OPTION":
      return `unknown flag ${showText(quoted)}${takesArguments ? ' (an argument that starts with "-" goes after "--")' : ""}`;
    case "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL":
      return `takes no argument, got ${showText(quoted)}`;
    default:
      return escapeHidden(e.message.replace(/\s+/g, " "));
  }
}

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
  const listen = values["listen"] === undefined ? undefined : parseListenAddress(String(values["listen"]));
  if (listen !== undefined && "problem" in listen) throw new UsageError(`--listen: ${listen.problem}`);
  const exitIdle = values["exit-idle"];
  if (exitIdle !== undefined && listen === undefined) throw new UsageError("--exit-idle needs --listen: on stdin/stdout the sidecar ends with its input");
  const exitIdleMs = typeof exitIdle === "string" ? parseCount(exitIdle, "--exit-idle", 1) : undefined;
  return { framing, logLevel: level as LogLevel, limits, maxRequestBody: maxRequestBody(values, env), ...(resume ? { resume } : {}), ...(listen ? { listen } : {}), ...(exitIdleMs !== undefined ? { exitIdleMs } : {}) };
}

export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv): ServeOptions {
  return serveOptions(parseFlags("serve", argv, SERVE_FLAGS, false).values as Record<string, string | boolean | undefined>, env);
}
