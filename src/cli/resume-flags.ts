import type { ParseArgsConfig } from "node:util";
// A type only: the run log is loaded by the command that opens it.
import type { ResumeFlags } from "../resume/open.js";
import { UsageError } from "./usage-error.js";
import { parseSeconds, parseSize } from "./sizes.js";

/** The resume flags of `proxy` and of the sidecar (protocol/README.md §16). */
export const RESUME_OPTIONS = {
  store: { type: "string" },
  "detach-grace": { type: "string" },
  retention: { type: "string" },
  "run-log-bytes": { type: "string" },
  "log-bytes": { type: "string" },
} as const satisfies ParseArgsConfig["options"];

/**
 * The defaults, and why (§16). A client on a flaky network is back within seconds: a phone that
 * changes networks, a laptop that wakes, a load balancer's reset; browsers retry SSE after 3 s. 30 s
 * of grace covers several retries with backoff without running an abandoned agent, and paying for
 * its model, much longer. 300 s of retention lets a reloaded page find a run that has just ended.
 */
export const RESUME_DEFAULTS = { graceMs: 30_000, retentionMs: 300_000, maxRunBytes: 16 * 1024 * 1024, maxTotalBytes: 256 * 1024 * 1024 } as const;

/** What `--store` names: the run log in this process, in Redis, or no resume at all. */
export function parseStore(text: string): ResumeFlags["store"] | undefined {
  if (text === "memory") return { kind: "memory" };
  if (text === "none") return undefined;
  if (/^rediss?:\/\//.test(text)) {
    try {
      const url = new URL(text);
      if (url.hostname !== "" && /^(\/\d{0,2})?$/.test(url.pathname)) return { kind: "redis", url: url.href };
    } catch {
      // a UsageError below
    }
  }
  throw new UsageError(`--store: expected memory, none, or redis://HOST:PORT[/DB], got ${JSON.stringify(text)}`);
}

/** The resume the flags ask for; undefined with `--store none` (then no other resume flag may be given). */
export function resumeFlags(values: Record<string, unknown>, env: NodeJS.ProcessEnv): ResumeFlags | undefined {
  const store = parseStore(String(values["store"] ?? env["AGUI_STATE_STORE"] ?? "memory"));
  if (store === undefined) {
    const other = Object.keys(RESUME_OPTIONS).find((k) => k !== "store" && values[k] !== undefined);
    if (other !== undefined) throw new UsageError(`--${other} has no effect with --store none`);
    return undefined;
  }
  const pick = <T>(flag: string, fallback: T, parse: (text: unknown) => T): T => (values[flag] === undefined ? fallback : parse(values[flag]));
  return {
    store,
    graceMs: pick("detach-grace", RESUME_DEFAULTS.graceMs, (t) => parseSeconds("detach-grace", t)),
    retentionMs: pick("retention", RESUME_DEFAULTS.retentionMs, (t) => parseSeconds("retention", t)),
    maxRunBytes: pick("run-log-bytes", RESUME_DEFAULTS.maxRunBytes, (t) => parseSize("run-log-bytes", t, 1024)),
    maxTotalBytes: pick("log-bytes", RESUME_DEFAULTS.maxTotalBytes, (t) => parseSize("log-bytes", t, 1024)),
  };
}
