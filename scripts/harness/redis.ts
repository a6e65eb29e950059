import { freePort } from "./ports.js";
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

/** How many ports startRedis tries before it gives up. */
const TRIES = 5;

/**
 * A redis-server of the test's own, on a free port of loopback, keeping nothing on disk; the kill
 * registry (scripts/harness/teardown.ts) ends it after the test. Resolves once it accepts
 * connections. A port found free can be taken by another test file before redis-server binds it:
 * then it exits saying "Address already in use", and another port is tried.
 */
export async function startRedis(): Promise<RunningRedis> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = start({ name: "redis-server", file: "redis-server", args: [] }, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "yes"]);
    try {
      await child.until(() => child.stdout.includes("Ready to accept connections"), "redis-server's ready line");
      return { child, port, url: `redis://127.0.0.1:${port}/0` };
    } catch (e) {
      const taken = `${child.stdout.toString("utf8")}${String(child.stderr)}`.includes("Address already in use");
      if (!taken || attempt === TRIES) throw e;
    }
  }
}
