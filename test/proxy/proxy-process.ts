import { SEA, start, type Sidecar } from "../../scripts/harness/process.js";

/** The one line the proxy prints when it is ready. */
export const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:(\d+))\n$/;

/** Starts the single executable as `agui-state proxy ARGS`; the kill registry (scripts/harness/teardown.ts) ends it after the test. */
export const spawnProxy = (args: readonly string[]): Sidecar => start(SEA, ["proxy", ...args]);

export interface RunningProxy {
  child: Sidecar;
  /** The proxy's origin, from its "listening on" line. */
  url: string;
}

/** Starts `agui-state proxy --upstream URL --listen 127.0.0.1:0 ...` and waits for its one stdout line. */
export async function startProxy(upstream: string, args: readonly string[] = []): Promise<RunningProxy> {
  const child = spawnProxy(["--upstream", upstream, "--listen", "127.0.0.1:0", ...args]);
  await child.until(() => child.stdout.includes("\n"), "the proxy's listening line");
  const line = child.stdout.toString("utf8");
  const m = LISTENING.exec(line);
  if (!m) throw new Error(`unexpected stdout from the proxy: ${JSON.stringify(line)}`);
  return { child, url: m[1] as string };
}
