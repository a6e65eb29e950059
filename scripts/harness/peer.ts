import { encode, FrameParser, type Framing } from "./frames.js";
import { asResponse, notification, request, type Id, type Response, type RpcError } from "./jsonrpc.js";
import { Child, WAIT_MS, type Exit, type SpawnOptions } from "./process.js";

/**
 * A JSON-RPC client over a child's stdin and stdout, in either framing:
 * calls matched to their responses by id, batches and notifications, and
 * stdout parsed strictly as frames as it arrives (anything that is not a
 * whole, well-formed frame of responses fails every pending call and every
 * wait). Tests, the bench, the soak and the demo all talk to the sidecar
 * through it.
 */

export interface PeerOptions extends SpawnOptions {
  /** The framing the peer writes and expects back. Default ndjson. */
  framing?: Framing;
  /** Keep every frame in `frames` (default). The bench and the soak, which read millions, turn it off. */
  keepFrames?: boolean;
}

interface Pending {
  resolve: (r: Response) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

export class Peer extends Child {
  readonly framing: Framing;
  /** Every frame read from stdout, in order (a batch reply is one array frame), unless keepFrames is false. */
  readonly frames: unknown[] = [];
  /** Responses with id null (parse errors, oversized messages without a readable id). */
  readonly orphans: Response[] = [];
  /** Responses to an id nothing was waiting for: answered twice, or never asked. */
  readonly unmatched: Response[] = [];
  /** Responses read so far, batch members counted one by one. */
  answered = 0;
  stdoutBytes = 0;
  private nextId = 1;
  private readonly keep: boolean;
  private readonly pending = new Map<Id, Pending>();
  private readonly parser: FrameParser;
  private parseError: Error | undefined;
  /** The driver's own CPU time per request (µs) in the last pump(), as this process measured it. */
  lastPump: { driverCpuUs: number } | undefined;
  /** While pump() runs: frames are counted, not parsed. */
  private counting: { got: number; wake: () => void } | undefined;

  constructor(opts: PeerOptions = {}) {
    super(opts);
    this.framing = opts.framing ?? "ndjson";
    this.keep = opts.keepFrames ?? true;
    this.parser = new FrameParser(this.framing);
  }

  protected override onStdout(d: Buffer): void {
    if (this.parseError) return;
    this.stdoutBytes += d.length;
    try {
      if (this.counting) {
        const n = this.parser.bodies(d).length;
        this.answered += n;
        this.counting.got += n;
        return this.counting.wake();
      }
      for (const f of this.parser.push(d)) {
        if (this.keep) this.frames.push(f);
        if (Array.isArray(f) && f.length === 0) throw new Error("stdout carries an empty array of responses");
        for (const r of Array.isArray(f) ? f : [f]) this.deliver(asResponse(r));
      }
    } catch (e) {
      this.parseError = e as Error;
      this.failAll(this.parseError);
    }
  }

  protected override onExit(exit: Exit): void {
    this.failAll(new Error(`the sidecar exited (code ${String(exit.code)}, signal ${String(exit.signal)}) with the call pending`));
  }

  protected override failure(): Error | undefined {
    return this.parseError;
  }

  private deliver(r: Response): void {
    this.answered++;
    const p = this.pending.get(r.id);
    if (p) {
      this.pending.delete(r.id);
      if (p.timer) clearTimeout(p.timer);
      p.resolve(r);
    } else if (r.id === null) this.orphans.push(r);
    else this.unmatched.push(r);
  }

  private failAll(e: Error): void {
    for (const [id, p] of this.pending) {
      if (p.timer) clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(e);
    }
  }

  /** A stdout parse failure, if any: stdout must only ever carry whole frames of responses. */
  get stdoutError(): Error | undefined {
    return this.parseError;
  }

  /** Bytes of an incomplete frame at the end of stdout so far. */
  get stdoutPending(): number {
    return this.parser.pending;
  }

  /**
   * Waits for the response to `id` without sending anything (the caller
   * writes the request). Rejects after `ms` (0: never; the caller has its own
   * guard), at the exit, or on bad stdout.
   */
  expect(id: Id, ms = WAIT_MS): Promise<Response> {
    return new Promise((resolve, reject) => {
      if (this.parseError) return reject(this.parseError);
      if (this.exited) return reject(new Error(`the sidecar has exited (${JSON.stringify(this.exited)})`));
      if (this.pending.has(id)) return reject(new Error(`id ${JSON.stringify(id)} is already in flight`));
      const timer =
        ms > 0
          ? setTimeout(() => {
              this.pending.delete(id);
              reject(new Error(`no response to id ${JSON.stringify(id)} within ${ms} ms; stderr:\n${this.stderr.slice(-2000)}`));
            }, ms)
          : undefined;
      this.pending.set(id, { resolve, reject, timer });
    });
  }

  /** Sends pre-encoded bytes that carry a request with `id`; resolves with its response. */
  callRaw(id: Id, bytes: string | Buffer, ms = WAIT_MS): Promise<Response> {
    const answer = this.expect(id, ms);
    void this.write(bytes);
    return answer;
  }

  /** Sends a request with a fresh id (or `id`); resolves with its response. */
  call(method: string, params?: unknown, opts: { id?: Id; ms?: number } = {}): Promise<Response> {
    const id = opts.id !== undefined ? opts.id : this.nextId++;
    return this.callRaw(id, encode(this.framing, request(id, method, params)), opts.ms);
  }

  /** The result of a call; throws (failing the test) on an error response. */
  async ok(method: string, params?: unknown, ms?: number): Promise<Record<string, unknown>> {
    const r = await this.call(method, params, ms === undefined ? {} : { ms });
    if (!("result" in r)) throw new Error(`${method} failed: ${JSON.stringify(r.error)}`);
    return r.result as Record<string, unknown>;
  }

  /** The error of a call; throws (failing the test) on a result. */
  async fails(method: string, params?: unknown, ms?: number): Promise<RpcError> {
    const r = await this.call(method, params, ms === undefined ? {} : { ms });
    if (!("error" in r)) throw new Error(`${method} was expected to fail, got ${JSON.stringify(r.result).slice(0, 500)}`);
    return r.error;
  }

  /** Sends a notification: nothing comes back. */
  notify(method: string, params?: unknown): Promise<void> {
    return this.write(encode(this.framing, notification(method, params)));
  }

  /** Sends one batch of requests, fresh ids in order; resolves with their responses in the same order. */
  batch(calls: readonly [method: string, params?: unknown][], ms = WAIT_MS): Promise<Response[]> {
    const ids = calls.map(() => this.nextId++);
    const answers = Promise.all(ids.map((id) => this.expect(id, ms)));
    void this.write(encode(this.framing, calls.map(([method, params], i) => request(ids[i] as number, method, params))));
    return answers;
  }

  /**
   * For the bench: sends `lines` (NDJSON requests) keeping `window` in
   * flight, and resolves with round trips per second. Replies are counted as
   * whole frames, not parsed or matched, and the requests that fit in the
   * window leave in one write: the driver must cost less than the process it
   * measures, or every ratio against the echo loop looks better than it is.
   * `lastPump` says what this driver itself spent.
   */
  pump(lines: readonly string[], window: number): Promise<number> {
    const t = performance.now();
    const cpu = process.cpuUsage();
    const n = lines.length;
    let sent = 0;
    const stdin = this.child.stdin;
    return new Promise((resolve, reject) => {
      const counting = {
        got: 0,
        wake: (): void => {
          const batch: string[] = [];
          while (sent < n && sent - counting.got < window) batch.push(lines[sent++] as string);
          if (batch.length > 0) stdin.write(batch.length === 1 ? (batch[0] as string) : batch.join(""));
          if (counting.got < n) return;
          this.counting = undefined;
          const used = process.cpuUsage(cpu);
          this.lastPump = { driverCpuUs: (used.user + used.system) / n };
          resolve(n / ((performance.now() - t) / 1000));
        },
      };
      this.counting = counting;
      this.until(() => this.counting !== counting, `${n} replies`, 60_000).catch(reject);
      counting.wake();
    });
  }
}

/** Starts a peer; the registry kills it after the test if it is still running. */
export function startPeer(opts: PeerOptions = {}): Peer {
  return new Peer(opts);
}
