import { DEFAULT_POLICY } from "../../src/resume/credentials.js";
import { randomBytes } from "node:crypto";
import { PassThrough } from "node:stream";
import pino from "pino";
import { startServer as serve, type Server } from "../../src/rpc/node/server.js";
import type { Framing } from "../../src/rpc/node/stdio.js";
import { StateService, type ServiceOptions } from "../../src/service/state-service.js";
import { StreamService, type Pipeline } from "../../src/service/stream-service.js";
import { RESUME_DEFAULTS } from "../../src/cli/resume-flags.js";
import { MemoryLog } from "../../src/resume/memory-log.js";
import type { ResumeOptions } from "../../src/resume/recorder.js";
import { StreamFixer } from "../../src/stream/fixer.js";
import { ndjson } from "./frames.js";
import { request, type Id } from "./jsonrpc.js";
import { WAIT_MS } from "./process.js";

/** A server over in-memory streams: what a test writes is the sidecar's stdin. */
export interface Paired {
  input: PassThrough;
  output: PassThrough;
  server: Server;
  service: StateService;
  streams: StreamService;
  /** Everything written to the output so far. */
  text(): string;
  /** Waits until the output holds at least n NDJSON lines and returns them parsed. */
  lines(n: number): Promise<unknown[]>;
}

/** The stream pipeline already loaded (src/cli/stream-pipeline.ts loads it on the first openStream). */
export const LOADED_PIPELINE: Pipeline = { get: () => (opts) => new StreamFixer(opts), load: () => undefined, loading: () => undefined };

/** The run log the sidecar has with no flag (`--store memory`, protocol/README.md §16), fresh for each call. */
export const defaultResume = (graceMs: number = RESUME_DEFAULTS.graceMs): ResumeOptions => ({ log: new MemoryLog(RESUME_DEFAULTS), key: randomBytes(32), policy: DEFAULT_POLICY, graceMs });

export function paired(framing: Framing = "auto", service: StateService | ServiceOptions = {}, streams?: StreamService): Paired {
  const input = new PassThrough();
  const output = new PassThrough();
  const svc = service instanceof StateService ? service : new StateService(service);
  const str = streams ?? new StreamService({ limits: svc.limits, pipeline: LOADED_PIPELINE, resume: defaultResume() });
  const server = serve({ input, output, framing, service: svc, streams: str, log: pino({ level: "silent" }) });
  let out = "";
  const waiters: (() => void)[] = [];
  output.on("data", (c: Buffer) => {
    out += c.toString("utf8");
    for (const w of waiters.splice(0)) w();
  });
  const lines = async (n: number): Promise<unknown[]> => {
    for (;;) {
      const got = out.split("\n").filter((l) => l.length > 0);
      if (got.length >= n) return got.map((l) => JSON.parse(l) as unknown);
      await new Promise<void>((resolve, reject) => {
        // The harness's hang guard: a worker that shares two cores with other suites can stall for a while.
        const t = setTimeout(() => reject(new Error(`timed out waiting for ${n} lines; got:\n${out}`)), WAIT_MS);
        waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  };
  return { input, output, server, service: svc, streams: str, text: () => out, lines };
}

/** One request as an NDJSON line, ready for `input.write`. */
export const requestLine = (id: Id, method: string, params?: unknown): string => ndjson(request(id, method, params));
