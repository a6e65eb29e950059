import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { asResponse, BINARY, childEnv, encode, parseBody, WAIT_MS, type Exit, type Framing, type Id, type Response } from "./spawn.js";

/**
 * A mini JSON-RPC client over the real binary for the hardening tests: calls
 * matched to replies by id, stdout parsed strictly as frames as it arrives
 * (anything that is not a whole, well-formed frame fails the test), and, on
 * request, stderr left completely unread. Every session is registered so
 * afterEach can SIGKILL whatever is left (killSessions).
 */

/** Incremental, strict parser of the sidecar's stdout. */
export class FrameParser {
  private buf: Buffer = Buffer.alloc(0);

  constructor(private readonly framing: Framing) {}

  /** Bytes of an incomplete frame held back. 0 means stdout so far ends on a frame boundary. */
  get pending(): number {
    return this.buf.length;
  }

  /** Takes a chunk; returns the frames it completes. Throws on anything that is not a frame. */
  push(chunk: Buffer): unknown[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: unknown[] = [];
    let at = 0;
    for (;;) {
      if (this.framing === "ndjson") {
        const nl = this.buf.indexOf(10, at);
        if (nl === -1) break;
        const line = this.buf.subarray(at, nl);
        if (line.length === 0 || line.includes(13)) throw new Error(`stdout: blank line or \\r at byte ${at}`);
        out.push(parseBody(line, `line at byte ${at}`));
        at = nl + 1;
      } else {
        const head = /^Content-Length: (\d+)\r\n\r\n/.exec(this.buf.subarray(at, at + 40).toString("latin1"));
        if (!head) {
          if (this.buf.length - at >= 40) throw new Error(`stdout: not a Content-Length header: ${JSON.stringify(this.buf.subarray(at, at + 40).toString("latin1"))}`);
          break;
        }
        const start = at + head[0].length;
        const end = start + Number(head[1]);
        if (end > this.buf.length) break;
        out.push(parseBody(this.buf.subarray(start, end), `frame at byte ${at}`));
        at = end;
      }
    }
    this.buf = this.buf.subarray(at);
    return out;
  }
}

export interface SessionOptions {
  args?: readonly string[];
  env?: Record<string, string>;
  /** The framing the session writes and expects back. Default ndjson. */
  framing?: Framing;
  /** Collect stderr (default). false: never touch the child's stderr pipe at all. */
  readStderr?: boolean;
  /** Give the child this file descriptor as its stderr instead of a pipe (readStderr is then moot). */
  stderrFd?: number;
}

interface Pending {
  resolve: (r: Response) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout;
}

const live = new Set<Session>();

export class Session {
  readonly child: ChildProcessWithoutNullStreams;
  readonly framing: Framing;
  /** Every frame read from stdout, in order (a batch reply is one array frame). */
  readonly frames: unknown[] = [];
  /** Single responses with id null (parse errors, oversized messages without a readable id). */
  readonly orphans: Response[] = [];
  stdoutBytes = 0;
  private err = "";
  private nextId = 1;
  private readonly pending = new Map<Id, Pending>();
  private readonly parser: FrameParser;
  private exitStatus: Exit | undefined;
  private parseError: Error | undefined;
  private readonly closed: Promise<Exit>;
  private readonly listeners = new Set<() => void>();

  constructor(opts: SessionOptions = {}) {
    this.framing = opts.framing ?? "ndjson";
    this.parser = new FrameParser(this.framing);
    this.child = spawn(BINARY, [...(opts.args ?? [])], { env: childEnv(opts.env), stdio: ["pipe", "pipe", opts.stderrFd ?? "pipe"] }) as ChildProcessWithoutNullStreams;
    const readStderr = opts.readStderr !== false && opts.stderrFd === undefined;
    live.add(this);
    this.child.stdin.on("error", () => undefined);
    this.child.stdout.on("error", () => undefined);
    this.child.stdout.on("data", (d: Buffer) => this.onData(d));
    if (readStderr) {
      this.child.stderr.on("data", (d: Buffer) => {
        this.err += d.toString("utf8");
      });
    }
    this.closed = new Promise((resolve) => {
      this.child.on("error", (e) => {
        this.exitStatus = { code: null, signal: null };
        this.failAll(e);
        resolve(this.exitStatus);
      });
      // "close" when stdout (and stderr, if read) are drained; "exit" otherwise we could wait forever on an unread stderr.
      this.child.on(readStderr ? "close" : "exit", (code, signal) => {
        this.exitStatus = { code, signal };
        live.delete(this);
        this.failAll(new Error(`the sidecar exited (code ${String(code)}, signal ${String(signal)}) with the call pending`));
        this.notify();
        resolve(this.exitStatus);
      });
    });
  }

  private onData(d: Buffer): void {
    this.stdoutBytes += d.length;
    let frames: unknown[];
    try {
      frames = this.parser.push(d);
    } catch (e) {
      this.parseError ??= e as Error;
      this.failAll(e as Error);
      this.notify();
      return;
    }
    for (const f of frames) {
      this.frames.push(f);
      for (const r of Array.isArray(f) ? f : [f]) this.deliver(asResponse(r));
    }
    this.notify();
  }

  private deliver(r: Response): void {
    const p = this.pending.get(r.id);
    if (p) {
      this.pending.delete(r.id);
      clearTimeout(p.timer);
      p.resolve(r);
    } else if (r.id === null) this.orphans.push(r);
  }

  private failAll(e: Error): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(e);
    }
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }

  /** A stdout parse failure, if any: stdout must only ever carry whole frames. */
  get stdoutError(): Error | undefined {
    return this.parseError;
  }

  /** Bytes of an incomplete frame at the end of stdout so far. */
  get stdoutPending(): number {
    return this.parser.pending;
  }

  get stderr(): string {
    return this.err;
  }

  get exited(): Exit | undefined {
    return this.exitStatus;
  }

  get pid(): number {
    return this.child.pid as number;
  }

  /** Writes bytes; resolves once the pipe took them (backpressure respected). Never rejects. */
  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve) => {
      const stdin = this.child.stdin;
      if (stdin.destroyed || stdin.writableEnded) return resolve();
      if (stdin.write(data)) return resolve();
      const done = (): void => {
        stdin.off("drain", done);
        stdin.off("close", done);
        resolve();
      };
      stdin.on("drain", done);
      stdin.on("close", done);
    });
  }

  end(): void {
    this.child.stdin.end();
  }

  /** Sends a request with a fresh id (or `id`); resolves with its response. Rejects after `ms`, on exit, or on bad stdout. */
  call(method: string, params?: unknown, opts: { id?: Id; ms?: number } = {}): Promise<Response> {
    const id = opts.id !== undefined ? opts.id : this.nextId++;
    const msg = params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
    return this.callRaw(id, encode(this.framing, msg), opts.ms);
  }

  /** Sends pre-encoded bytes that carry a request with `id`; resolves with its response. */
  callRaw(id: Id, bytes: string | Buffer, ms = WAIT_MS): Promise<Response> {
    return new Promise((resolve, reject) => {
      if (this.exitStatus) return reject(new Error(`the sidecar has exited (${JSON.stringify(this.exitStatus)})`));
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`no response to id ${JSON.stringify(id)} within ${ms} ms; stderr:\n${this.err.slice(-2000)}`));
      }, ms);
      this.pending.set(id, { resolve, reject, timer });
      void this.write(bytes);
    });
  }

  /** The result of a call; throws (failing the test) on an error response. */
  async ok(method: string, params?: unknown, ms?: number): Promise<Record<string, unknown>> {
    const r = await this.call(method, params, ms === undefined ? {} : { ms });
    if (!("result" in r)) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
    return r.result as Record<string, unknown>;
  }

  /** The error of a call; throws (failing the test) on a result. */
  async fails(method: string, params?: unknown, ms?: number): Promise<{ code: number; message: string; data?: Record<string, unknown> }> {
    const r = await this.call(method, params, ms === undefined ? {} : { ms });
    if (!("error" in r)) throw new Error(`${method} was expected to fail, got ${JSON.stringify(r.result).slice(0, 500)}`);
    return r.error as { code: number; message: string; data?: Record<string, unknown> };
  }

  /** Resolves once `test()` holds (checked on every stdout chunk and at exit); rejects after `ms`. */
  until(test: () => boolean, what: string, ms = WAIT_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (this.parseError) done(this.parseError);
        else if (test()) done();
        else if (this.exitStatus) done(new Error(`the sidecar exited (${JSON.stringify(this.exitStatus)}) before ${what}`));
      };
      const timer = setTimeout(() => done(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
      // Also polled: a condition may depend on more than stdout (a paused stream, a buffer).
      const poll = setInterval(check, 25);
      const done = (e?: Error): void => {
        clearTimeout(timer);
        clearInterval(poll);
        this.listeners.delete(check);
        if (e) reject(e);
        else resolve();
      };
      this.listeners.add(check);
      check();
    });
  }

  /** The exit status; rejects after `ms`. */
  waitForExit(ms = WAIT_MS): Promise<Exit> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the sidecar did not exit within ${ms} ms; stderr:\n${this.err.slice(-2000)}`)), ms);
      void this.closed.then((exit) => {
        clearTimeout(timer);
        resolve(exit);
      });
    });
  }

  /** Resident set size of the child right now, in bytes (0 once it is gone). */
  rss(): number {
    return rssOf(this.pid);
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.exitStatus === undefined && this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

export function startSession(opts: SessionOptions = {}): Session {
  return new Session(opts);
}

/** SIGKILLs every session still running; for afterEach. */
export function killSessions(): void {
  for (const s of live) s.kill();
  live.clear();
}

/** VmRSS of a process from /proc/<pid>/status, in bytes; 0 when it cannot be read. */
export function rssOf(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Samples a process's VmRSS every `everyMs` until stopped; reports the peak. */
export function sampleRss(pid: number, everyMs = 5): { stop(): { peak: number; samples: number } } {
  let peak = rssOf(pid);
  let samples = 1;
  const timer = setInterval(() => {
    peak = Math.max(peak, rssOf(pid));
    samples++;
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      peak = Math.max(peak, rssOf(pid));
      return { peak, samples: samples + 1 };
    },
  };
}

export const MB = 1024 * 1024;
export const mb = (bytes: number): string => (bytes / MB).toFixed(1);

/** A value nested `depth` containers deep (`{}` is 1, `{"a":{}}` is 2), alternating objects and arrays. */
export function nested(depth: number, leaf: unknown = 1): unknown {
  let v: unknown = depth > 0 ? (depth % 2 ? { x: leaf } : [leaf]) : leaf;
  for (let d = depth - 1; d > 0; d--) v = d % 2 ? { x: v } : [v];
  return v;
}

/**
 * A real OS pipe for a child's stderr, as Python's and Go's subprocess pipes
 * are (Node's stdio "pipe" is a socketpair): a FIFO in a temporary
 * directory. `writeFd` is for the child (close it once spawned); `readFd` is
 * non-blocking: readSync throws EAGAIN when it is empty and returns 0 at the end.
 */
export function osPipe(): { readFd: number; writeFd: number; close(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-state-pipe-"));
  const fifo = path.join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY);
  let closed = false;
  return {
    readFd,
    writeFd,
    close: () => {
      if (closed) return;
      closed = true;
      for (const fd of [readFd, writeFd]) {
        try {
          closeSync(fd);
        } catch {
          // already closed by the caller
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads what is in a non-blocking fd right now (one read, up to `max` bytes); empty when nothing is there. */
export function readNow(fd: number, max = 1 << 20): Buffer {
  const buf = Buffer.alloc(max);
  try {
    return buf.subarray(0, readSync(fd, buf, 0, max, null));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EAGAIN") return Buffer.alloc(0);
    throw e;
  }
}
