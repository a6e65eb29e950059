import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync } from "node:fs";

/** An env without the two variables that slow or alter every Node start. */
export function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env["NODE_EXTRA_CA_CERTS"];
  delete env["NODE_OPTIONS"];
  return env;
}

export interface Stat {
  median: number;
  min: number;
  max: number;
}

export function stat(xs: number[]): Stat {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)] as number, min: s[0] as number, max: s[s.length - 1] as number };
}

/** Runs A and B alternately, `rounds` times each, so both see the same machine noise. */
export async function alternate(rounds: number, a: () => Promise<number>, b: () => Promise<number>): Promise<[Stat, Stat]> {
  const xs: number[] = [];
  const ys: number[] = [];
  for (let i = 0; i < rounds; i++) {
    xs.push(await a());
    ys.push(await b());
  }
  return [stat(xs), stat(ys)];
}

/** A newline-delimited JSON-RPC peer over a child's stdin/stdout. */
export class Peer {
  readonly child: ChildProcessWithoutNullStreams;
  private buf = "";
  private waiting: ((line: string) => void)[] = [];
  private lines: string[] = [];

  constructor(cmd: string, args: string[]) {
    this.child = spawn(cmd, args, { env: cleanEnv(), stdio: ["pipe", "pipe", "pipe"] });
    this.child.stderr.resume();
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk: string) => {
      this.buf += chunk;
      let nl: number;
      while ((nl = this.buf.indexOf("\n")) !== -1) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        const w = this.waiting.shift();
        if (w) w(line);
        else this.lines.push(line);
      }
    });
  }

  send(text: string): void {
    this.child.stdin.write(text);
  }

  next(): Promise<string> {
    const l = this.lines.shift();
    return l !== undefined ? Promise.resolve(l) : new Promise((resolve) => this.waiting.push(resolve));
  }

  async call(method: string, params: unknown, id = 1): Promise<unknown> {
    this.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    const line = await this.next();
    const msg = JSON.parse(line) as { result?: unknown; error?: unknown };
    if (msg.error) throw new Error(`${method}: ${JSON.stringify(msg.error)}`);
    return msg.result;
  }

  /** Sends `n` copies of `line` keeping `window` in flight; resolves with round trips per second. */
  async pump(lines: string[], window: number): Promise<number> {
    const t = performance.now();
    let sent = 0;
    let got = 0;
    const n = lines.length;
    while (sent < Math.min(window, n)) this.send(lines[sent++] as string);
    while (got < n) {
      await this.next();
      got++;
      if (sent < n) this.send(lines[sent++] as string);
    }
    return n / ((performance.now() - t) / 1000);
  }

  rssKiB(): number {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.child.pid}/status`, "utf8"));
    return Number(m?.[1] ?? NaN);
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    await new Promise((resolve) => this.child.once("exit", resolve));
  }
}
