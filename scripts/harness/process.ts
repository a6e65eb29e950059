import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";
import { ROOT } from "./fixtures.js";
import { rssOf } from "./os.js";

/**
 * Starting the built sidecar (or any program) as a child, for tests, the
 * bench, the fuzzer, the soak and the demo: one environment, stderr captured
 * (or deliberately left unread), waiting for the exit without ever hanging,
 * and a registry of live children that scripts/harness/teardown.ts kills after
 * every test. scripts/harness/peer.ts adds JSON-RPC on top.
 */

export const BINARY = path.join(ROOT, "dist/agui-state");
export const BUNDLE = path.join(ROOT, "dist/agui-state.cjs");

/** A way to start a program: the single executable, the bundle under this node, or anything else. */
export interface Command {
  name: string;
  file: string;
  args: readonly string[];
}

export const SEA: Command = { name: "single executable (dist/agui-state)", file: BINARY, args: [] };
export const COMMANDS: readonly Command[] = [SEA, { name: "node bundle (dist/agui-state.cjs)", file: process.execPath, args: [BUNDLE] }];

/**
 * The environment for a child. Removed: NODE_OPTIONS (vitest and tsx put
 * loader hooks there, which must not run inside the sidecar), every
 * AGUI_STATE_* setting (a developer's shell must not change the limits or the
 * log level under test) and NODE_EXTRA_CA_CERTS (node reads that file at
 * every start, which the start-up figure would measure; no child here makes a
 * TLS connection). `extra` is added last, so it may set NODE_OPTIONS again.
 */
export function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k === "NODE_OPTIONS" || k === "NODE_EXTRA_CA_CERTS" || k.startsWith("AGUI_STATE_")) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** How long anything waits for a child before it fails: a hang guard, never what a test asserts. */
export const WAIT_MS = 10_000;

export interface SpawnOptions {
  /** Default: the single executable. */
  command?: Command;
  args?: readonly string[];
  env?: Record<string, string>;
  /**
   * "read" (default): collected into `stderr`. "unread": a pipe the parent
   * never touches. "ignore": /dev/null. A number: that file descriptor.
   */
  stderr?: "read" | "unread" | "ignore" | number;
}

const live = new Set<{ kill(): void }>();

/** SIGKILLs every child still running; scripts/harness/teardown.ts calls it after each test. */
export function killAll(): void {
  for (const c of live) c.kill();
  live.clear();
}

/** A child spawned another way (a sidecar that listens, listen.ts) is killed with the rest. */
export function killWithTheRest(child: { kill(signal?: NodeJS.Signals): boolean }): void {
  live.add({ kill: () => void child.kill("SIGKILL") });
}

/** A running child: stdin to write to, stderr (if read), its exit, and waits that cannot hang. */
export class Child {
  readonly child: ChildProcessWithoutNullStreams;
  /**
   * With stderr "unread": what the child left in its stderr pipe, read from
   * the moment it exited. Node drops what an unread stdio stream holds once
   * the child exits (it resumes the stream on the next tick), so a test that
   * checks what a parent that never read would find takes it here.
   */
  readonly leftover: Promise<string> | undefined;
  private err = "";
  private exitStatus: Exit | undefined;
  private spawnError: Error | undefined;
  private readonly closed: Promise<Exit>;
  private readonly listeners = new Set<() => void>();

  constructor(opts: SpawnOptions = {}) {
    const cmd = opts.command ?? SEA;
    const stderr = opts.stderr ?? "read";
    const fd2 = typeof stderr === "number" ? stderr : stderr === "ignore" ? "ignore" : "pipe";
    this.child = spawn(cmd.file, [...cmd.args, ...(opts.args ?? [])], { env: childEnv(opts.env), stdio: ["pipe", "pipe", fd2] }) as ChildProcessWithoutNullStreams;
    live.add(this);
    // Writing to a child that has exited (or closed stdin) raises EPIPE on our
    // side; that is the child's behaviour under test, not an error of ours.
    this.child.stdin.on("error", () => undefined);
    this.child.stdout.on("error", () => undefined);
    this.child.stdout.on("data", (d: Buffer) => {
      this.onStdout(d);
      this.wake();
    });
    if (stderr === "read") {
      this.child.stderr.on("data", (d: Buffer) => {
        this.err += d.toString("utf8");
        this.wake();
      });
    }
    if (stderr === "unread") {
      const pipe = this.child.stderr;
      this.leftover = new Promise((resolve) => {
        this.child.once("exit", () => {
          let text = "";
          pipe.setEncoding("utf8");
          pipe.on("data", (d: string) => (text += d));
          pipe.once("end", () => resolve(text));
          pipe.once("close", () => resolve(text));
        });
      });
    }
    this.closed = new Promise((resolve) => {
      this.child.on("error", (e) => {
        this.spawnError = e;
        this.settle({ code: null, signal: null });
        resolve({ code: null, signal: null });
      });
      // "close" once stdout and stderr are read to the end; "exit" when stderr
      // is never read, or the wait would last as long as the parent does not read it.
      this.child.on(stderr === "unread" ? "exit" : "close", (code, signal) => {
        const exit = { code, signal };
        this.settle(exit);
        resolve(exit);
      });
    });
  }

  private settle(exit: Exit): void {
    this.exitStatus ??= exit;
    live.delete(this);
    this.onExit(this.exitStatus);
    this.wake();
  }

  /** For subclasses: each chunk of stdout, as it arrives. */
  protected onStdout(chunk: Buffer): void {
    void chunk;
  }

  /** For subclasses: called when the child has exited. */
  protected onExit(exit: Exit): void {
    void exit;
  }

  /** For subclasses: a failure that ends every wait (a stdout that is not frames). */
  protected failure(): Error | undefined {
    return undefined;
  }

  protected wake(): void {
    for (const l of [...this.listeners]) l();
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

  /** Resident set size right now, in bytes (0 once it is gone); for reports, never for assertions. */
  rss(): number {
    return rssOf(this.pid);
  }

  /**
   * Writes bytes to stdin; resolves once the pipe took them, so a writer that
   * awaits it is held back by a child that does not read. Never rejects: the
   * callback also comes, with an error, when the pipe breaks or is destroyed.
   */
  write(data: string | Buffer): Promise<void> {
    return new Promise((resolve) => {
      const stdin = this.child.stdin;
      if (stdin.destroyed || stdin.writableEnded) return resolve();
      stdin.write(data, () => resolve());
    });
  }

  /** Writes `data` (if any) and ends stdin. */
  end(data?: string | Buffer): void {
    if (data !== undefined) this.child.stdin.end(data);
    else this.child.stdin.end();
  }

  /**
   * Resolves once `test()` holds, checked on every output chunk, at the exit
   * and every 25 ms (a condition may depend on more than output: a paused
   * stream, a buffer). A test() that throws counts as "not yet". Rejects on a
   * failure(), at the exit, or after `ms` (a hang guard).
   */
  until(test: () => boolean, what: string, ms = WAIT_MS): Promise<void> {
    return new Promise((resolve, reject) => {
      let last: unknown;
      const holds = (): boolean => {
        try {
          return test();
        } catch (e) {
          last = e;
          return false;
        }
      };
      const check = (): void => {
        const failed = this.failure();
        if (failed) done(failed);
        else if (holds()) done();
        else if (this.exitStatus) done(new Error(`the child exited (${JSON.stringify(this.exitStatus)}) before ${what}${last ? ` (${String(last)})` : ""}; stderr:\n${this.err.slice(-2000)}`));
      };
      const timer = setTimeout(() => done(new Error(`timed out after ${ms} ms waiting for ${what}${last ? ` (${String(last)})` : ""}; stderr:\n${this.err.slice(-2000)}`)), ms);
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

  /** The exit status once the child has exited (and its read outputs are drained); rejects after `ms` or if it never started. */
  waitForExit(ms = WAIT_MS): Promise<Exit> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the child did not exit within ${ms} ms; stderr:\n${this.err.slice(-2000)}`)), ms);
      void this.closed.then((exit) => {
        clearTimeout(timer);
        if (this.spawnError) reject(this.spawnError);
        else resolve(exit);
      });
    });
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.exitStatus === undefined && this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }
}

/** A child whose stdout is kept whole, as bytes: for tests of the raw wire. */
export class Sidecar extends Child {
  private readonly out: Buffer[] = [];

  protected override onStdout(chunk: Buffer): void {
    this.out.push(chunk);
  }

  get stdout(): Buffer {
    if (this.out.length > 1) this.out.splice(0, this.out.length, Buffer.concat(this.out));
    return this.out[0] ?? Buffer.alloc(0);
  }
}

/** Starts `cmd` with `args`; the registry kills it after the test if it is still running. */
export function start(cmd: Command, args: readonly string[] = [], env: Record<string, string> = {}): Sidecar {
  return new Sidecar({ command: cmd, args, env });
}

export interface Run extends Exit {
  stdout: Buffer;
  stderr: string;
}

/** Starts `cmd`, writes `input`, ends stdin and waits for the exit. */
export async function run(cmd: Command, args: readonly string[], input: string | Buffer, ms = WAIT_MS): Promise<Run> {
  const s = start(cmd, args);
  s.end(input);
  const exit = await s.waitForExit(ms);
  return { ...exit, stdout: s.stdout, stderr: s.stderr };
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

/** The whole records of a stderr still being written: a last line without its newline is left out. */
export function logSoFar(stderr: string): LogRecord[] {
  return parseLog(stderr.slice(0, stderr.lastIndexOf("\n") + 1));
}

/** How many whole records on stderr carry this message. */
export const logged = (stderr: string, msg: string): number => logSoFar(stderr).filter((r) => r.msg === msg).length;
