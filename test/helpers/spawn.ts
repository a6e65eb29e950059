import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { isUtf8 } from "node:buffer";
import path from "node:path";
import { ROOT } from "./fixtures.js";

/**
 * Black-box helpers for the built sidecar: spawn it, feed it bytes, read its
 * stdout back as protocol frames (strictly: stdout carries frames and nothing
 * else, protocol/README.md §2), and wait for it to exit without ever hanging a test.
 */

export const BINARY = path.join(ROOT, "dist/agui-state");
export const BUNDLE = path.join(ROOT, "dist/agui-state.cjs");

/** A way to start the sidecar: the single executable, or the bundle under this node. */
export interface Command {
  name: string;
  file: string;
  args: readonly string[];
}

export const COMMANDS: readonly Command[] = [
  { name: "single executable (dist/agui-state)", file: BINARY, args: [] },
  { name: "node bundle (dist/agui-state.cjs)", file: process.execPath, args: [BUNDLE] },
];

/**
 * The environment for a child: NODE_OPTIONS removed (vitest and tsx put
 * loader hooks there, which must not run inside the sidecar), and no inherited
 * AGUI_STATE_* settings, so a developer's shell cannot change the limits or
 * the log level under test. `extra` is added last.
 */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === "NODE_OPTIONS" || k.startsWith("AGUI_STATE_")) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How long a test waits for anything from a child before it fails. */
export const WAIT_MS = 10_000;

const live = new Set<Sidecar>();

/** A running sidecar with its stdout (as bytes) and stderr collected. */
export class Sidecar {
  readonly child: ChildProcessWithoutNullStreams;
  private readonly out: Buffer[] = [];
  private err = "";
  private exit: Exit | undefined;
  private readonly closed: Promise<Exit>;
  private readonly listeners = new Set<() => void>();

  constructor(cmd: Command, args: readonly string[] = [], env: Record<string, string> = {}) {
    this.child = spawn(cmd.file, [...cmd.args, ...args], { env: childEnv(env), stdio: ["pipe", "pipe", "pipe"] });
    live.add(this);
    // Writing to a child that has exited (or closed stdin) raises EPIPE on our
    // side; that is the child's behaviour under test, not an error of the test.
    this.child.stdin.on("error", () => undefined);
    this.child.stdout.on("error", () => undefined);
    this.child.stdout.on("data", (d: Buffer) => {
      this.out.push(d);
      this.notify();
    });
    this.child.stderr.on("data", (d: Buffer) => {
      this.err += d.toString("utf8");
      this.notify();
    });
    // "close", not "exit": by then stdout and stderr have been read to the end.
    this.closed = new Promise((resolve, reject) => {
      this.child.on("error", reject);
      this.child.on("close", (code, signal) => {
        this.exit = { code, signal };
        live.delete(this);
        this.notify();
        resolve(this.exit);
      });
    });
    // A failed spawn is reported by waitForExit; don't let it go unhandled meanwhile.
    this.closed.catch(() => undefined);
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }

  get stdout(): Buffer {
    return Buffer.concat(this.out);
  }

  get stderr(): string {
    return this.err;
  }

  get exited(): Exit | undefined {
    return this.exit;
  }

  /** Writes bytes to the child's stdin; resolves once they are handed to the pipe. */
  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.stdin.destroyed || this.child.stdin.writableEnded) return resolve();
      this.child.stdin.write(data, () => resolve());
    });
  }

  /** Writes `data` (if any) and ends stdin. */
  end(data?: string | Buffer): void {
    if (data !== undefined) this.child.stdin.end(data);
    else this.child.stdin.end();
  }

  /** Resolves once `test()` holds, checked on each output chunk and at exit; rejects after `ms`. */
  until(test: () => boolean, what: string, ms = WAIT_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (test()) done();
        else if (this.exit) done(new Error(`the sidecar exited (${JSON.stringify(this.exit)}) before ${what}; stderr:\n${this.err}`));
      };
      const timer = setTimeout(() => done(new Error(`timed out after ${ms} ms waiting for ${what}; stderr:\n${this.err}`)), ms);
      const done = (e?: Error): void => {
        clearTimeout(timer);
        this.listeners.delete(check);
        if (e) reject(e);
        else resolve();
      };
      this.listeners.add(check);
      check();
    });
  }

  /** Resolves with the exit status once the child has exited and its output is read; rejects after `ms`. */
  waitForExit(ms = WAIT_MS): Promise<Exit> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the sidecar did not exit within ${ms} ms; stderr:\n${this.err}`)), ms);
      this.closed.then(
        (exit) => {
          clearTimeout(timer);
          resolve(exit);
        },
        (e: unknown) => {
          clearTimeout(timer);
          reject(e as Error);
        },
      );
    });
  }

  /** Stderr as pino records; see parseLog. */
  logLines(): LogRecord[] {
    return parseLog(this.err);
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.exit === undefined && this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

/** Starts the sidecar with `args`. Call killAll() in afterEach. */
export function start(cmd: Command, args: readonly string[] = [], env: Record<string, string> = {}): Sidecar {
  return new Sidecar(cmd, args, env);
}

/** SIGKILLs every sidecar still running: for afterEach, so no test leaves a child behind. */
export function killAll(): void {
  for (const s of live) s.kill();
  live.clear();
}

export interface LogRecord {
  level: number;
  msg?: string;
  [k: string]: unknown;
}

/** Parses stderr as pino JSON lines: every line must be a JSON object with a numeric `level`, or this throws. */
export function parseLog(stderr: string): LogRecord[] {
  return stderr
    .split("\n")
    .filter((l) => l !== "")
    .map((line) => {
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch {
        throw new Error(`stderr line is not JSON: ${JSON.stringify(line)}`);
      }
      if (typeof v !== "object" || v === null || typeof (v as { level?: unknown }).level !== "number") throw new Error(`stderr line is not a pino record: ${line}`);
      return v as LogRecord;
    });
}

export interface Run extends Exit {
  stdout: Buffer;
  stderr: string;
}

/** Starts the sidecar, writes `input`, ends stdin and waits for the exit. */
export async function run(cmd: Command, args: readonly string[], input: string | Buffer, ms = WAIT_MS): Promise<Run> {
  const s = start(cmd, args);
  s.end(input);
  const exit = await s.waitForExit(ms);
  return { ...exit, stdout: s.stdout, stderr: s.stderr };
}

// ---------------------------------------------------------------------------
// Frames

export type Framing = "ndjson" | "lsp";

/** One NDJSON line per message. */
export function ndjson(...messages: unknown[]): string {
  return messages.map((m) => (typeof m === "string" ? m : JSON.stringify(m)) + "\n").join("");
}

/** One LSP `Content-Length` frame per message; a string is sent as the body verbatim. */
export function lsp(...messages: unknown[]): Buffer {
  return Buffer.concat(
    messages.map((m) => {
      const body = Buffer.from(typeof m === "string" ? m : JSON.stringify(m), "utf8");
      return Buffer.concat([Buffer.from(`Content-Length: ${body.length}\r\n\r\n`, "latin1"), body]);
    }),
  );
}

export function encode(framing: Framing, ...messages: unknown[]): Buffer {
  return framing === "ndjson" ? Buffer.from(ndjson(...messages), "utf8") : lsp(...messages);
}

/** One frame's body: strict UTF-8, then JSON. Throws, naming `where`, on anything else. */
export function parseBody(body: Buffer, where: string): unknown {
  if (!isUtf8(body)) throw new Error(`stdout ${where} is not valid UTF-8`);
  const text = body.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`stdout ${where} is not JSON: ${JSON.stringify(text.slice(0, 300))}`);
  }
}

/**
 * Parses stdout as NDJSON, strictly: every line is one JSON value, the output
 * ends with `\n`, and there are no blank lines or `\r`. Anything else throws.
 */
export function parseNdjson(out: Buffer): unknown[] {
  const frames: unknown[] = [];
  let at = 0;
  while (at < out.length) {
    const nl = out.indexOf(10, at);
    if (nl === -1) throw new Error(`stdout ends in the middle of a line at byte ${at}: ${JSON.stringify(out.subarray(at, at + 200).toString("utf8"))}`);
    const line = out.subarray(at, nl);
    if (line.length === 0) throw new Error(`stdout has a blank line at byte ${at}`);
    if (line.includes(13)) throw new Error(`stdout line at byte ${at} contains \\r`);
    frames.push(parseBody(line, `line at byte ${at}`));
    at = nl + 1;
  }
  return frames;
}

const LSP_HEADER = /^Content-Length: (\d+)\r\n\r\n/;

/**
 * Parses stdout as LSP frames, strictly: `Content-Length: N\r\n\r\n` then
 * exactly N bytes of JSON, back to back, nothing between or after them.
 */
export function parseLsp(out: Buffer): unknown[] {
  const frames: unknown[] = [];
  let at = 0;
  while (at < out.length) {
    const head = LSP_HEADER.exec(out.subarray(at, at + 64).toString("latin1"));
    if (!head) throw new Error(`stdout at byte ${at} is not a Content-Length header: ${JSON.stringify(out.subarray(at, at + 100).toString("latin1"))}`);
    const start = at + head[0].length;
    const end = start + Number(head[1]);
    if (end > out.length) throw new Error(`stdout ends inside a frame: byte ${at} announces ${head[1]} bytes, ${out.length - start} follow`);
    frames.push(parseBody(out.subarray(start, end), `frame at byte ${at}`));
    at = end;
  }
  return frames;
}

export function parseFrames(framing: Framing, out: Buffer): unknown[] {
  return framing === "ndjson" ? parseNdjson(out) : parseLsp(out);
}

// ---------------------------------------------------------------------------
// JSON-RPC

export type Id = string | number | null;

export interface RpcError {
  code: number;
  message: string;
  data?: { code?: string; [k: string]: unknown };
}

export type Response = { jsonrpc: "2.0"; id: Id; result: unknown } | { jsonrpc: "2.0"; id: Id; error: RpcError };

/**
 * Checks that `v` is one well-formed JSON-RPC 2.0 response: exactly the
 * members jsonrpc, id and one of result/error, and a well-formed error.
 */
export function asResponse(v: unknown): Response {
  const fail = (why: string): never => {
    throw new Error(`not a JSON-RPC response (${why}): ${JSON.stringify(v)?.slice(0, 300)}`);
  };
  if (typeof v !== "object" || v === null || Array.isArray(v)) return fail("not an object");
  const r = v as Record<string, unknown>;
  if (r["jsonrpc"] !== "2.0") fail("jsonrpc is not 2.0");
  const id = r["id"];
  if (!("id" in r) || !(typeof id === "string" || typeof id === "number" || id === null)) fail("bad id");
  const keys = Object.keys(r).sort().join(",");
  if (keys === "error,id,jsonrpc") {
    const e = r["error"] as Record<string, unknown> | null;
    if (typeof e !== "object" || e === null || !Number.isInteger(e["code"]) || typeof e["message"] !== "string") fail("bad error object");
  } else if (keys !== "id,jsonrpc,result") fail(`members are ${keys}`);
  return v as Response;
}

/** Every frame as a single response (no batches). */
export function responses(frames: unknown[]): Response[] {
  return frames.map(asResponse);
}

/** The error of a response, failing when it is a result. */
export function errorOf(r: Response | undefined): RpcError {
  if (!r || !("error" in r)) throw new Error(`expected an error response, got ${JSON.stringify(r)}`);
  return r.error;
}

/** The result of a response, failing when it is an error. */
export function resultOf(r: Response | undefined): unknown {
  if (!r || !("result" in r)) throw new Error(`expected a result, got ${JSON.stringify(r)}`);
  return r.result;
}

export const request = (id: Id, method: string, params?: unknown): Record<string, unknown> =>
  params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };

export const notification = (method: string, params?: unknown): Record<string, unknown> =>
  params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params };
