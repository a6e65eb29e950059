import fs from "node:fs";
import type { ParseArgsConfig } from "node:util";
import { DEFAULT_POLICY, parsePart, type CredentialPart, type CredentialPolicy } from "../resume/credentials.js";
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
  "max-runs": { type: "string" },
  credential: { type: "string", multiple: true },
  "connect-anonymous": { type: "boolean" },
  "secret-file": { type: "string" },
} as const satisfies ParseArgsConfig["options"];

/**
 * The defaults, and why (§16). A client on a flaky network is back within seconds: a phone that
 * changes networks, a laptop that wakes, a load balancer's reset; browsers retry SSE after 3 s. 30 s
 * of grace covers several retries with backoff without running an abandoned agent, and paying for
 * its model, much longer. 300 s of retention lets a reloaded page find a run that has just ended.
 */
export const RESUME_DEFAULTS = { graceMs: 30_000, retentionMs: 300_000, maxRunBytes: 16 * 1024 * 1024, maxTotalBytes: 256 * 1024 * 1024, maxRuns: 10_000 } as const;

/**
 * The shortest secret the credential key is made from: 32 bytes, the HMAC-SHA-256 key length
 * (RFC 2104 §3: a shorter key weakens it).
 */
export const MIN_SECRET_BYTES = 32;

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
    maxRuns: pick("max-runs", RESUME_DEFAULTS.maxRuns, (t) => parseCount("max-runs", t)),
    policy: credentialPolicy(values, env),
    ...secretOf(values, env),
  };
}

function parseCount(flag: string, text: unknown): number {
  const s = String(text);
  const n = /^\d{1,9}$/.test(s) ? Number(s) : NaN;
  if (!(n >= 1)) throw new UsageError(`--${flag}: expected a whole number of at least 1, got ${JSON.stringify(s)}`);
  return n;
}

/** --credential (repeatable) or AGUI_STATE_CREDENTIALS (comma-separated), and --connect-anonymous or AGUI_STATE_CONNECT_ANONYMOUS=1 (§16). */
function credentialPolicy(values: Record<string, unknown>, env: NodeJS.ProcessEnv): CredentialPolicy {
  const flags = values["credential"] as string[] | undefined;
  const specs = flags ?? (env["AGUI_STATE_CREDENTIALS"] === undefined ? undefined : env["AGUI_STATE_CREDENTIALS"].split(",").filter((s) => s.trim() !== ""));
  const parts: CredentialPart[] = [];
  for (const spec of specs ?? []) {
    const part = parsePart(spec);
    if (!part) throw new UsageError(`--credential: expected header:NAME or cookie:NAME, got ${JSON.stringify(spec)}`);
    if (!parts.some((p) => p.kind === part.kind && p.name === part.name)) parts.push(part);
  }
  const anon = values["connect-anonymous"] === true || env["AGUI_STATE_CONNECT_ANONYMOUS"] === "1";
  return { parts: specs === undefined ? DEFAULT_POLICY.parts : parts, connectAnonymous: anon };
}

/** The secret credentials are keyed by: --secret-file, else AGUI_STATE_SECRET_FILE, else AGUI_STATE_SECRET (the text); none, {}. Never a flag's value: a command line is visible to every user of the host. */
function secretOf(values: Record<string, unknown>, env: NodeJS.ProcessEnv): { secret?: Buffer } {
  const file = (values["secret-file"] as string | undefined) ?? env["AGUI_STATE_SECRET_FILE"];
  let secret: Buffer | undefined;
  if (file !== undefined) {
    try {
      secret = fs.readFileSync(file);
    } catch (e) {
      throw new UsageError(`--secret-file: cannot read ${JSON.stringify(file)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  } else if (env["AGUI_STATE_SECRET"] !== undefined) secret = Buffer.from(env["AGUI_STATE_SECRET"], "utf8");
  if (secret === undefined) return {};
  // A file written by an editor or `echo` ends with a newline that is no part of the secret.
  const text = secret.length > 0 && secret[secret.length - 1] === 10 ? secret.subarray(0, secret[secret.length - 2] === 13 ? -2 : -1) : secret;
  if (text.length < MIN_SECRET_BYTES) throw new UsageError(`the resume secret must be at least ${MIN_SECRET_BYTES} bytes, got ${text.length} (openssl rand -base64 48 makes one)`);
  return { secret: text };
}
