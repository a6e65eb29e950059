import { spawn, type ChildProcess } from "node:child_process";
import { connect, type Socket } from "node:net";
import { BINARY, childEnv, killWithTheRest } from "./process.js";

/**
 * A sidecar that listens (`serve --listen`, protocol/README.md §2, "One sidecar per host") and a
 * connection to it, for the tests and the bench.
 */

/** One JSON-RPC connection to a `serve --listen` sidecar, in JSON lines: replies matched by id. */
export class Connection {
  private buffered = "";
  private next = 1;
  private readonly waiting = new Map<number, (reply: Record<string, unknown>) => void>();
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      this.buffered += chunk;
      let nl: number;
      while ((nl = this.buffered.indexOf("\n")) >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        const reply = JSON.parse(line) as Record<string, unknown>;
        this.waiting.get(reply["id"] as number)?.(reply);
        this.waiting.delete(reply["id"] as number);
      }
    });
    this.closed = new Promise((resolve) => socket.once("close", () => resolve()));
  }

  static open(path: string): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const socket = connect(path.startsWith("tcp:") ? { host: "127.0.0.1", port: Number(path.split(":").pop()) } : { path });
      socket.once("connect", () => resolve(new Connection(socket)));
      socket.once("error", reject);
    });
  }

  /** Sends one request; resolves with its whole reply. */
  call(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.next++;
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      this.socket.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  }

  /** Sends one request; resolves with its result, throwing on an error reply. */
  async result<T = Record<string, unknown>>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const reply = await this.call(method, params);
    if ("error" in reply) throw new Error(`${method}: ${JSON.stringify(reply["error"])}`);
    return reply["result"] as T;
  }

  end(): Promise<void> {
    this.socket.end();
    return this.closed;
  }
}

/** A `serve --listen` process: its stdout and stderr gathered, its exit awaited. */
export class Listening {
  stdout = "";
  stderr = "";
  readonly exited: Promise<number | null>;
  /** Resolves with the address once it prints "listening on ADDRESS"; with undefined if it exits first. */
  readonly ready: Promise<string | undefined>;

  constructor(readonly child: ChildProcess) {
    child.stdout?.setEncoding("utf8");
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (c: string) => (this.stderr += c));
    this.exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    this.ready = new Promise((resolve) => {
      child.stdout?.on("data", (c: string) => {
        this.stdout += c;
        const m = /^listening on (\S+)\n/.exec(this.stdout);
        if (m) resolve(m[1]);
      });
      void this.exited.then(() => resolve(undefined));
    });
  }

  static start(args: string[], env: Record<string, string> = {}): Listening {
    const child = spawn(BINARY, ["serve", ...args], { env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
    killWithTheRest(child);
    return new Listening(child);
  }

  stop(signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }
}
