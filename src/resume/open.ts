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
}

/**
 * The run log the flags name, with the key credentials are hashed under; null (after one line on
 * stderr) when Redis cannot be reached. Redis's client is loaded only for a redis:// store.
 */
export async function openRunLog(flags: ResumeFlags, log: Log): Promise<ResumeOptions | null> {
  const caps = { retentionMs: flags.retentionMs, maxRunBytes: flags.maxRunBytes, maxTotalBytes: flags.maxTotalBytes };
  if (flags.store.kind === "memory") {
    // Drawn at first use, not at start: a sidecar that never files a run never asks the system for
    // entropy (under wine, a start that did failed with ERR_OSSL_ENTROPY_SOURCE_STRENGTH_TOO_WEAK).
    let key: Buffer | undefined;
    return {
      log: new MemoryLog(caps),
      get key(): Buffer {
        return (key ??= nodeCrypto().randomBytes(32));
      },
      graceMs: flags.graceMs,
    };
  }
  const { openRedisLog } = await import("./redis-log.js");
  try {
    const { runLog } = await openRedisLog(flags.store.url, caps, log);
    return { log: runLog, key: nodeCrypto().randomBytes(32), graceMs: flags.graceMs };
  } catch (e) {
    process.stderr.write(`agui-state: cannot use the store ${flags.store.url}: ${(e as Error).message}\n`);
    return null;
  }
}
