import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Log } from "../log.js";
import { announcement, classify, headerMap, threadIdIn, type HeaderMap, type RequestHead, type RequestKind } from "../resume/edge.js";
import type { RunEnd } from "../resume/log.js";
import { Recorder, type ResumeOptions } from "../resume/recorder.js";
import { readPages, PAGE_BYTES } from "../resume/pages.js";
import { resolve, runStart, type Resolution } from "../resume/rejoin.js";
import type { Baseline } from "./baseline.js";

/** The request's head as the resume edge reads it (src/resume/edge.ts): every header as the client sent it. */
function headOf(req: IncomingMessage): RequestHead {
  const pairs: [string, string][] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) pairs.push([req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string]);
  return { method: req.method ?? "GET", path: req.url ?? "/", headers: headerMap(pairs) };
}

/** An answer's headers by lower-case name, as the edge reads them. */
function responseMap(headers: OutgoingHttpHeaders): HeaderMap {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) out[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : String(value);
  return out;
}

/**
 * The proxy's side of resume: it files each event stream it repairs as a run in the log, with an id
 * on every event, keeps the run going for the grace period when its client leaves, and answers
 * rejoins and reloads from the log without calling the upstream. What a request is, who may read a
 * run and what a refusal says are the resume edge's (src/resume/edge.ts, rejoin.ts), as for the
 * middleware.
 */
export class Resume {
  constructor(
    private readonly opts: ResumeOptions,
    private readonly logger: Log,
    /** The request body read at most for its threadId (--max-request-body). */
    private readonly maxBody: number,
  ) {}

  kind(req: IncomingMessage): RequestKind {
    return classify(headOf(req));
  }

  /**
   * The recorder of one event stream, once its answer's head and its request's body are known. The
   * answer's `headers` gain the announcement here, before the head is written (§16).
   */
  record(req: IncomingMessage, baseline: Baseline, status: number, headers: OutgoingHttpHeaders, cancel: () => void): Recorder {
    const recorder = new Recorder(this.opts.log, this.opts.graceMs, cancel, this.logger);
    const response = responseMap(headers);
    Object.assign(headers, announcement(response));
    const start = runStart(this.opts, { threadId: baseline.threadId, request: headOf(req), status, response, state: baseline.state, messages: baseline.messages ?? [], opening: recorder.opening });
    this.opts.log.begin(recorder.run, start).catch((e: unknown) => this.logger.error({ err: String(e), run: recorder.run }, "the run log could not open this run; it cannot be resumed"));
    return recorder;
  }

  /** Answers a rejoin or a reload from the log. The upstream is never called. */
  async serve(kind: "rejoin" | "reload", req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req, this.maxBody);
    if (res.destroyed) return;
    const found = await resolve(this.opts, kind, headOf(req), body === undefined ? undefined : threadIdIn(body));
    if (found.refused) {
      this.logger.info({ kind }, kind === "rejoin" ? "rejoin refused: 410" : "nothing to connect to: 204");
      const { status, headers, body: text } = found.refused;
      res.writeHead(status, text === "" ? headers : { ...headers, "content-length": Buffer.byteLength(text) }).end(text);
      return;
    }
    return this.replay(res, found);
  }

  /**
   * The run's events after the id, then its live tail until it ends; a reload's prelude right after
   * the first event. Page by page, each written once the socket took the last (back-pressure, §16):
   * a client that reads slowly holds one page in this process, however long the run.
   */
  private async replay(res: ServerResponse, found: Exclude<Resolution, { refused: object }>): Promise<void> {
    const { info, after, prelude } = found;
    res.writeHead(info.status, info.headers);
    res.flushHeaders();
    const end: RunEnd | "left" = await readPages(this.opts.log, info.run, after, prelude, PAGE_BYTES, res);
    this.logger.info({ run: info.run, after, reason: end }, "rejoin served");
    // Only a run that ended as its upstream ended it ends cleanly; any other end must look broken to the client.
    if (end === "finished") res.end();
    else res.destroy();
  }
}

/** The request's body as text, or undefined past `limit` bytes or when the client goes away. */
function readBody(req: IncomingMessage, limit: number): Promise<string | undefined> {
  return new Promise((done) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on("data", (c: Buffer) => {
      bytes += c.length;
      if (bytes <= limit) chunks.push(c);
    });
    req.on("end", () => done(bytes > limit ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("close", () => done(undefined));
    req.on("error", () => done(undefined));
  });
}
