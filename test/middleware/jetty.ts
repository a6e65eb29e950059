import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { untilPrinted } from "../../scripts/harness/printed.js";
import { BINARY, childEnv } from "../../scripts/harness/process.js";

/** Debian's jars a Ring agent runs on (libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure). */
export const JARS = ["data.json", "ring-core", "ring-jetty-adapter"].map((j) => `/usr/share/java/${j}.jar`);

/** A Ring agent's JVM (a namespace of clients/clojure/test), once it has said where it listens. */
export interface Jetty {
  child: ChildProcessWithoutNullStreams;
  /** The URLs of its `listening URL...` line, in order. */
  urls: string[];
  /** The first of them. */
  url: string;
  /** What it has written to stderr so far (its middleware's log lines). */
  stderr: () => string;
}

const started: ChildProcessWithoutNullStreams[] = [];

/**
 * Starts `clojure -m NAMESPACE ARGS` with the sidecar binary from AGUI_STATE_BIN, as a deployment finds
 * it, and resolves once it prints `listening URL` (`servers` URLs on one line, one per Jetty). Started
 * outside the harness's children on purpose: those are killed after every test, and a JVM takes seconds,
 * so a test file starts its JVMs once and ends them with stopJetties() in afterAll. Rejects when it exits
 * first, or after `startMs` (a hang guard, never an assertion).
 */
export function startJetty(namespace: string, opts: { startMs: number; args?: string[]; env?: Record<string, string>; servers?: number }): Promise<Jetty> {
  const servers = opts.servers ?? 1;
  const what = servers === 1 ? "the Jetty server" : "the Jetty servers";
  const classpath = [...JARS, "clients/clojure/src", "clients/clojure/test"].join(":");
  const child = spawn("clojure", ["-cp", classpath, "-m", namespace, ...(opts.args ?? [])], { cwd: ROOT, env: childEnv({ AGUI_STATE_BIN: BINARY, ...opts.env }) });
  started.push(child);
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (stderr += d));
  const line = new RegExp(`^listening ${Array.from({ length: servers }, () => String.raw`(http:\/\/127\.0\.0\.1:\d+)`).join(" ")}\n`);
  return untilPrinted(
    child,
    (out) => {
      const urls = line.exec(out)?.slice(1);
      return urls && { child, urls, url: urls[0] as string, stderr: () => stderr };
    },
    { what, ms: opts.startMs, stderr: () => stderr },
  );
}

/** SIGKILLs every JVM this file started that is still running. */
export function stopJetties(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}

/** How many times agui-state.ring-resume-agent's handler ran: a rejoin served from the run log never reaches it. */
export const handlerCalls = async (jvm: Jetty): Promise<number> => Number(await (await fetch(`${jvm.url}/calls`)).text());

/** How many requests for `path` reached agui-state.ring-resume-agent's server, the ones the middleware answered itself included. */
export const requestsFor = async (jvm: Jetty, path: string): Promise<number> => Number(await (await fetch(`${jvm.url}/requests?path=${path}`)).text());
