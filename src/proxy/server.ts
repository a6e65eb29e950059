import { once } from "node:events";
import http, { type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from "node:http";
import https from "node:https";
import type { AddressInfo, Socket } from "node:net";
import type { Log } from "../log.js";
import type { Policy } from "../stream/client.js";
import { BodyTap, type Baseline } from "./baseline.js";
import { endToEnd, upstreamHeaders, upstreamUrl } from "./headers.js";
import type { Recorder, ResumeOptions } from "../resume/recorder.js";
import { Resume } from "./resume.js";
import { framingOf } from "../edge/response.js";
import { canDecode, fixStream, isProtobuf, type StreamWatcher } from "./sse.js";

/** How long a connection to the upstream may take before the request is answered 502. */
const CONNECT_TIMEOUT_MS = 10_000;

export interface ProxyServerOptions {
  upstream: URL;
  log: Log;
  /** How each event stream is repaired (default: deltas only, snapshots as sent). */
  policy?: Policy;
  /** Told of every event stream and its events (`--inspect`). */
  watcher?: StreamWatcher;
  /** Event ids, the run log, detach and rejoin (protocol/README.md §16); absent (`--store none`), none of them. */
  resume?: ResumeOptions;
  /** The request body kept for its RunAgentInput at most (--max-request-body). */
  maxRequestBody: number;
}

/** A 502's body: what went wrong between the proxy and the upstream. */
export interface BadGateway {
  error: { code: "upstream_unreachable" | "upstream_failed"; cause: string; message: string; upstream: string };
}

/**
 * The reverse proxy: a node:http server that forwards each request to the
 * upstream and fixes event streams on the way back. Nothing outlives a
 * request: each event stream gets its own StreamFixer, so any instance can
 * serve any request.
 */
export class ProxyServer {
  readonly server: http.Server;
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;
  /** Requests whose response has not finished: shutdown waits for them. */
  private readonly open = new Set<ServerResponse>();
  private readonly upstreams = new Set<http.ClientRequest>();
  private stopping = false;
  private idle: (() => void) | undefined;
  private readonly resume: Resume | undefined;

  constructor(private readonly opts: ProxyServerOptions) {
    const secure = opts.upstream.protocol === "https:";
    // A new connection per request, no keep-alive: reusing one races with an
    // upstream that closes it as idle, and the failed request could only be
    // retried blind, which may start an agent run twice. A run streams for
    // seconds; a handshake costs well under a millisecond on a local network.
    this.agent = secure ? new https.Agent({ keepAlive: false }) : new http.Agent({ keepAlive: false });
    this.request = secure ? https.request : http.request;
    this.resume = opts.resume && new Resume(opts.resume, opts.log, opts.maxRequestBody);
    // No request timeout: an agent run streams for as long as the model thinks.
    this.server = http.createServer({ requestTimeout: 0 }, (req, res) => this.handle(req, res));
  }

  /** Starts listening; resolves with the bound address, rejects if it cannot bind. */
  async listen(host: string, port: number): Promise<AddressInfo> {
    this.server.listen(port, host);
    await once(this.server, "listening"); // rejects with the server's "error" (EADDRINUSE, EACCES) instead
    return this.server.address() as AddressInfo;
  }

  /** The number of requests in flight. */
  get inFlight(): number {
    return this.open.size;
  }

  /**
   * Stops accepting, lets the requests in flight finish, and resolves once
   * they have (`drained` true) or `graceMs` has passed, in which case the
   * rest are cut off (`drained` false).
   */
  async shutdown(graceMs: number): Promise<{ drained: boolean; cut: number }> {
    this.stopping = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    // Keep-alive connections with no request in flight would hold close() open.
    this.server.closeIdleConnections();
    const drained = await new Promise<boolean>((resolve) => {
      if (this.open.size === 0) return resolve(true);
      const timer = setTimeout(() => resolve(false), graceMs);
      this.idle = () => {
        clearTimeout(timer);
        resolve(true);
      };
    });
    const cut = this.open.size;
    for (const r of this.upstreams) r.destroy();
    this.server.closeAllConnections();
    this.agent.destroy();
    await closed;
    return { drained, cut };
  }

  private finished(res: ServerResponse): void {
    this.open.delete(res);
    if (this.stopping && this.open.size === 0) this.idle?.();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const { log, upstream } = this.opts;
    const started = Date.now();
    this.open.add(res);
    // No keep-alive once stopping, so the client does not reuse a connection about to close.
    if (this.stopping) res.setHeader("connection", "close");
    const kind = this.resume?.kind(req) ?? "forward";
    if (kind !== "forward" && this.resume) {
      // A rejoin or a reload is answered from the run log: the upstream is never called (§16).
      res.on("close", () => this.finished(res));
      this.resume.serve(kind, req, res).catch((e: unknown) => {
        log.error({ method: req.method, url: req.url, err: String(e) }, "the run log failed to answer a rejoin");
        if (!res.headersSent) res.writeHead(503).end();
        else res.destroy();
      });
      return;
    }
    const target = upstreamUrl(upstream, req.url ?? "/");
    const socket = req.socket as Socket & { encrypted?: boolean };
    const headers = upstreamHeaders(req.headers, upstream, { address: socket.remoteAddress, encrypted: socket.encrypted === true });
    const tap = new BodyTap(req, this.opts.maxRequestBody);
    const line = { method: req.method, url: req.url };
    const up = this.send(target, req.method, headers);
    // Set once the answer is an event stream filed as a run (resume).
    const run: { recorder?: Recorder } = {};

    // A client that goes away takes its upstream request with it, so the
    // agent stops generating for nobody: at once, or, for a run that can be
    // rejoined, once the grace period passes with nobody back (§16).
    res.on("close", () => {
      this.finished(res);
      if (res.writableFinished) return;
      if (run.recorder?.detach()) {
        log.info({ ...line, run: run.recorder.run, events: run.recorder.events, ms: Date.now() - started }, "the client's connection closed before the answer ended; the run goes on, detached, for the grace period");
        return;
      }
      log.info({ ...line, ms: Date.now() - started }, "the client's connection closed before the answer ended; aborting the upstream request");
      up.destroy();
    });

    // Whether a connection to the upstream was made: an error before that
    // means it cannot be reached, one after means it failed to answer.
    let connected = false;
    up.on("socket", (s: Socket) => {
      if (!s.connecting) return void (connected = true);
      // An upstream that drops SYNs would hold the client for the kernel's
      // two minutes of retries; a 502 after CONNECT_TIMEOUT_MS says more.
      const timer = setTimeout(() => up.destroy(Object.assign(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`), { code: "ETIMEDOUT" })), CONNECT_TIMEOUT_MS);
      s.once("connect", () => {
        connected = true;
        clearTimeout(timer);
      });
      s.once("close", () => clearTimeout(timer));
    });
    const resume = this.resume;
    const record = resume && ((b: Baseline, h: OutgoingHttpHeaders, status: number) => (run.recorder = resume.record(req, b, status, h, () => up.destroy())));
    up.on("response", (answer) => this.answer(answer, res, tap, line, started, run, record));
    up.on("error", (e: NodeJS.ErrnoException) => {
      if (!res.headersSent && !res.destroyed) this.badGateway(res, target, !connected, e, line);
    });

    req.on("data", (chunk: Buffer) => {
      tap.take(chunk);
      if (!up.write(chunk)) {
        req.pause();
        up.once("drain", () => req.resume());
      }
    });
    req.on("end", () => up.end());
  }

  private send(target: URL, method: string | undefined, headers: OutgoingHttpHeaders): http.ClientRequest {
    const up = this.request(target, { method, headers, agent: this.agent });
    this.upstreams.add(up);
    up.on("close", () => this.upstreams.delete(up));
    return up;
  }

  private badGateway(res: ServerResponse, target: URL, unreachable: boolean, e: NodeJS.ErrnoException, line: Record<string, unknown>): void {
    const body: BadGateway = {
      error: {
        code: unreachable ? "upstream_unreachable" : "upstream_failed",
        cause: e.code ?? "ERROR",
        message: `${unreachable ? "cannot reach" : "no valid answer from"} the upstream ${target.origin}: ${e.message}`,
        upstream: target.origin,
      },
    };
    this.opts.log.error({ ...line, cause: body.error.cause, err: e.message }, "upstream failed; answering 502");
    const text = JSON.stringify(body);
    res.writeHead(502, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  private answer(answer: IncomingMessage, res: ServerResponse, tap: BodyTap, line: Record<string, unknown>, started: number, run: { recorder?: Recorder }, record?: (b: Baseline, headers: OutgoingHttpHeaders, status: number) => Recorder): void {
    const { log } = this.opts;
    const type = answer.headers["content-type"];
    const status = answer.statusCode ?? 502;
    // The edge's one list of event streams (edge/response.ts): SSE, and NDJSON, which carries no ids and is not resumable (§16).
    const framing = framingOf(type);
    if (framing !== undefined && canDecode(answer.headers["content-encoding"])) {
      const watch = this.opts.watcher && { watcher: this.opts.watcher, method: String(line.method ?? "GET"), path: String(line.url ?? "/") };
      const filed = framing === "sse" && record ? (b: Baseline, h: OutgoingHttpHeaders) => record(b, h, status) : undefined;
      void fixStream(answer, framing, res, tap.read(), log, this.opts.policy, watch, filed).then(({ complete, counts }) => {
        const recorder = run.recorder;
        const filing = recorder && { run: recorder.run, events: recorder.events, ...(recorder.upstreamIds > 0 ? { upstreamIdsReplaced: recorder.upstreamIds } : {}) };
        // One line per stream: the findings counted by what the client would do with them (kinds) and by what the proxy did (outcomes).
        if (complete) log.info({ ...line, status, ms: Date.now() - started, ...filing, ...counts }, "event stream fixed");
        else if (recorder?.detached) log.info({ ...line, status, ms: Date.now() - started, ...filing, ...counts }, "event stream fixed, detached from its client");
      });
      return;
    }
    if (isProtobuf(type)) log.warn({ ...line, status, contentType: type }, "upstream answered in the protobuf framing; passing it through untouched, its deltas unchecked");
    else if (framing !== undefined) log.warn({ ...line, status, contentEncoding: answer.headers["content-encoding"] }, "event stream in a content coding the proxy cannot decode; passing it through untouched");
    // Anything else passes byte for byte: same status, same end-to-end headers, same body.
    res.writeHead(status, answer.statusMessage, endToEnd(answer.headers));
    answer.pipe(res);
    // An answer cut off upstream is cut off here too, never ended cleanly.
    answer.on("error", () => res.destroy());
    answer.on("close", () => {
      if (!answer.complete) res.destroy();
    });
    res.on("finish", () => log.info({ ...line, status, ms: Date.now() - started }, "passed through"));
  }
}
