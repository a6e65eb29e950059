import { start, type Sidecar } from "./process.js";
import { toolchain } from "./toolchain.js";

/** Debian's redis-server, for the tests of the Redis run log: missing under CI=true, they fail. */
export const redis = toolchain("Redis (Debian redis-server)", ["redis-server", "--version"]);

export interface RunningRedis {
  child: Sidecar;
  port: number;
  /** The store flag's value for this server's database 0. */
  url: string;
}

/**
 * A redis-server of the test's own, on `port` of loopback, keeping nothing on disk; the kill registry
 * (scripts/harness/teardown.ts) ends it after the test. Resolves once it accepts connections.
 */
export async function startRedis(port: number): Promise<RunningRedis> {
  const child = start({ name: "redis-server", file: "redis-server", args: [] }, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "yes"]);
  await child.until(() => child.stdout.includes("Ready to accept connections"), "redis-server's ready line");
  return { child, port, url: `redis://127.0.0.1:${port}/0` };
}
