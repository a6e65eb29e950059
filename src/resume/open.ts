import type { CredentialPolicy } from "./credentials.js";
import { nodeCrypto } from "./node-crypto.js";
import type { Log } from "../log.js";
import { MemoryLog } from "./memory-log.js";
import type { ResumeOptions } from "./recorder.js";

/** What the resume flags ask for (src/cli/resume-flags.ts parses them), for `proxy` and the sidecar alike (protocol/README.md §16). */
export interface ResumeFlags {
  store: { kind: "memory" } | { kind: "redis"; url: string };
  graceMs: number;
  retentionMs: number;
  maxRunBytes: number;
  maxTotalBytes: number;
  maxRuns: number;
  policy: CredentialPolicy;
  /** The operator's secret (--secret-file, AGUI_STATE_SECRET_FILE, AGUI_STATE_SECRET); absent, each process draws a key of its own. */
  secret?: Buffer;
}

/** The credential key: derived from the secret, so the key itself is never the text an operator stores (HMAC as a key-derivation step, RFC 5869's extract). */
const keyOf = (secret: Buffer): Buffer => nodeCrypto().createHmac("sha256", "agui-state resume credentials").update(secret).digest();

/**
 * The run log the flags name, with the key credentials are hashed under; null (after one line on
 * stderr) when Redis cannot be reached. Redis's client is loaded only for a redis:// store. The key
 * comes from the operator's secret, never from the store: a key kept in Redis beside the hashes it
 * protects lets whoever reads Redis forge a credential (issue 38).
 */
export async function openRunLog(flags: ResumeFlags, log: Log): Promise<ResumeOptions | null> {
  const caps = { retentionMs: flags.retentionMs, maxRunBytes: flags.maxRunBytes, maxTotalBytes: flags.maxTotalBytes, maxRuns: flags.maxRuns };
  const secret = flags.secret;
  if (flags.store.kind === "memory") {
    // Drawn at first use, not at start: a sidecar that never files a run never asks the system for
    // entropy (under wine, a start that did failed with ERR_OSSL_ENTROPY_SOURCE_STRENGTH_TOO_WEAK).
    let key: Buffer | undefined;
    return {
      log: new MemoryLog(caps),
      get key(): Buffer {
        return (key ??= secret ? keyOf(secret) : nodeCrypto().randomBytes(32));
      },
      policy: flags.policy,
      graceMs: flags.graceMs,
    };
  }
  const { openRedisLog } = await import("./redis-log.js");
  try {
    const { runLog } = await openRedisLog(flags.store.url, caps, log);
    if (!secret) process.stderr.write("agui-state: no resume secret (--secret-file, AGUI_STATE_SECRET_FILE or AGUI_STATE_SECRET): credentials are keyed by this process alone, so a run started with a credential is rejoined only through this process; runs started without one rejoin through any. Give every replica the same secret.\n");
    return { log: runLog, key: secret ? keyOf(secret) : nodeCrypto().randomBytes(32), policy: flags.policy, graceMs: flags.graceMs };
  } catch (e) {
    process.stderr.write(`agui-state: cannot use the store ${flags.store.url}: ${(e as Error).message}\n`);
    return null;
  }
}
