import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Log } from "../log.js";
import { credentialOf, sameCredential } from "../resume/credentials.js";
import { mintId, newRun, parseId } from "../resume/ids.js";
import type { RunEnd, RunInfo, RunLog } from "../resume/log.js";
import { Stamper } from "../resume/stamp.js";
import { baselineOf, MAX_BASELINE_BYTES, type Baseline } from "./baseline.js";

/** How the proxy keeps runs for rejoins (protocol/README.md §16). */
export interface ResumeOptions {
  log: RunLog;
  /** The key credentials are hashed under (credentials.ts). */
  key: Buffer;
  /** How long a run goes on after its client left, waiting for a rejoin, in ms; 0 cancels it at once, as before resume. */
  graceMs: number;
}

/** What a request is, to the proxy: a rejoin (it carries Last-Event-ID), a reload (POST <agent path>/connect), or anything else. */
export type RequestKind = "rejoin" | "connect" | "forward";

/** The suffix of a reload's path, after the agent's (CopilotKit's convention). */
const CONNECT = "/connect";

/** A refused or unknown rejoin: one answer for both, so a refusal tells nothing (§16). */
export const GONE = { error: { code: "resume_unknown", message: "no run to resume from this Last-Event-ID: it is unknown, expired, or not yours; start a new run" } };

const pathOf = (url: string | undefined): string => (url ?? "/").split("?", 1)[0] as string;

/** The headers a rejoin is answered with: the run's own, as they were, less what was per response. */
function replayable(headers: OutgoingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name === "set-cookie" || name === "content-length" || name === "content-encoding") continue;
    out[name] = Array.isArray(value) ? value.join(", ") : String(value);
  }
  return out;
}

/** An SSE block whose data is `event`, for a reload's prelude (one line: JSON has no raw newline). */
const block = (event: unknown): string => `data: ${JSON.stringify(event)}\n\n`;

/**
 * The proxy's side of resume: it files each event stream it repairs as a run in the log, with an id
 * on every event, keeps the run going for the grace period when its client leaves, and answers
 * rejoins and reloads from the log without calling the upstream.
 */
export class Resume {
  constructor(
    private readonly opts: ResumeOptions,
    private readonly logger: Log,
  ) {}

  kind(req: IncomingMessage): RequestKind {
    const last = req.headers["last-event-id"];
    if (typeof last === "string" && last !== "") return "rejoin";
    if (req.method === "POST" && pathOf(req.url).endsWith(CONNECT)) return "connect";
    return "forward";
  }

  /** The recorder of one event stream, once its answer's head and its request's body are known. */
  record(req: IncomingMessage, baseline: Baseline, status: number, headers: OutgoingHttpHeaders, cancel: () => void): Recorder {
    const start = {
      threadId: baseline.threadId ?? "",
      path: pathOf(req.url),
      credential: this.credential(req),
      status,
      headers: replayable(headers),
      prelude: [block({ type: "STATE_SNAPSHOT", snapshot: baseline.state }), block({ type: "MESSAGES_SNAPSHOT", messages: baseline.messages ?? [] })],
    };
    const recorder = new Recorder(this.opts.log, this.opts.graceMs, cancel, this.logger);
    this.opts.log.begin(recorder.run, start).catch((e: unknown) => this.logger.error({ err: String(e), run: recorder.run }, "the run log could not open this run; it cannot be resumed"));
    return recorder;
  }

  /** Answers a rejoin or a reload from the log. The upstream is never called. */
  async serve(kind: "rejoin" | "connect", req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    if (res.destroyed) return;
    const threadId = body === undefined ? undefined : (baselineOf(body).threadId ?? "");
    const path = pathOf(req.url);
    if (kind === "rejoin") {
      const id = req.headers["last-event-id"] as string;
      const at = parseId(id);
      const info = at && (await this.allowed(await this.opts.log.find(at.run), req, threadId, path));
      if (!at || !info || (await this.opts.log.idAt(at.run, at.seq)) !== id) return this.refuse(res, kind, "unknown or refused Last-Event-ID");
      return this.replay(res, info, at.seq, []);
    }
    const base = path.slice(0, -CONNECT.length);
    const run = threadId === undefined ? undefined : await this.opts.log.latest(threadId, base);
    const info = run === undefined ? undefined : await this.allowed(await this.opts.log.find(run), req, threadId, base);
    if (!info) return this.refuse(res, kind, "no run of this thread to connect to");
    return this.replay(res, info, 0, info.prelude);
  }

  private credential(req: IncomingMessage): string {
    return credentialOf(this.opts.key, { authorization: req.headers.authorization, cookie: req.headers.cookie });
  }

  /** The run, when the request may read it: same thread, same agent path, same credentials. */
  private allowed(info: RunInfo | undefined, req: IncomingMessage, threadId: string | undefined, path: string): RunInfo | undefined {
    if (!info || info.threadId !== threadId || info.path !== path || !sameCredential(info.credential, this.credential(req))) return undefined;
    return info;
  }

  /**
   * An unknown, expired or refused rejoin is 410 Gone with a JSON body: the client should start a new
   * run. A reload with nothing to reload is 204 No Content: an empty stream, nothing to apply.
   */
  private refuse(res: ServerResponse, kind: "rejoin" | "connect", why: string): void {
    this.logger.info({ kind, why }, kind === "rejoin" ? "rejoin refused: 410" : "nothing to connect to: 204");
    if (kind === "connect") return void res.writeHead(204).end();
    const text = JSON.stringify(GONE);
    res.writeHead(410, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text);
  }

  /** The run's events after `after`, then its live tail until it ends; the prelude goes right after the first event. */
  private async replay(res: ServerResponse, info: RunInfo, after: number, prelude: readonly string[]): Promise<void> {
    res.writeHead(info.status, info.headers);
    res.flushHeaders();
    let pending = prelude.length > 0 ? prelude.join("") : undefined;
    let sent = 0;
    const unfollow = await this.opts.log.follow(info.run, after, {
      events: (list) => {
        if (res.destroyed) return;
        let text = "";
        for (const e of list) {
          text += e.block;
          if (pending !== undefined) {
            text += pending;
            pending = undefined;
          }
        }
        sent += list.length;
        res.write(text);
      },
      end: (reason: RunEnd) => {
        this.logger.info({ run: info.run, after, sent, reason }, "rejoin served");
        // Only a run that ended as its upstream ended it ends cleanly; any other end must look broken to the client.
        if (reason === "finished") res.end();
        else res.destroy();
      },
    });
    if (res.destroyed || res.writableEnded) unfollow();
    else res.once("close", unfollow);
  }
}

/**
 * One run as it streams: stamps each event's id, logs it, and, when the client leaves before the
 * end, keeps the run going until the grace period passes with nobody reading it.
 */
export class Recorder {
  readonly run = newRun();
  private seq = 0;
  private readonly stamper = new Stamper(() => mintId(this.run, ++this.seq));
  private done = false;
  private timer: NodeJS.Timeout | undefined;
  /** Whether the client left and the run goes on without it. */
  detached = false;

  constructor(
    private readonly log: RunLog,
    private readonly graceMs: number,
    private readonly cancel: () => void,
    private readonly logger: Log,
  ) {}

  get events(): number {
    return this.seq;
  }

  get upstreamIds(): number {
    return this.stamper.upstreamIds;
  }

  /** The client's text for one part of the repaired stream. */
  part(text: string): string {
    const { text: out, events } = this.stamper.push(text);
    if (events.length > 0) this.log.append(this.run, events);
    if (this.stamper.passing) this.finish("unresumable");
    return out;
  }

  /** The stream's end as its upstream ended it. */
  end(): string {
    const out = this.stamper.end().text;
    this.finish("finished");
    return out;
  }

  finish(reason: RunEnd): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.log.end(this.run, reason);
  }

  /** The client left before the end: true when the run goes on, detached, for the grace period. */
  detach(): boolean {
    if (this.done || this.graceMs === 0) return false;
    this.detached = true;
    this.arm();
    return true;
  }

  /** At the end of each grace period: a run somebody reads goes on; one nobody reads is cancelled. */
  private arm(): void {
    this.timer = setTimeout(() => {
      void this.log.readers(this.run).then(
        (n) => {
          if (this.done) return;
          if (n > 0) return this.arm();
          this.logger.info({ run: this.run, graceMs: this.graceMs, events: this.seq }, "nobody rejoined within the grace period; cancelling the upstream request");
          this.finish("cancelled");
          this.cancel();
        },
        () => this.arm(),
      );
    }, this.graceMs);
    // A detached run must not hold the process open on its own: shutdown cuts it.
    this.timer.unref();
  }
}

/** The request's body as text, or undefined past MAX_BASELINE_BYTES or when the client goes away. */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    req.on("data", (c: Buffer) => {
      bytes += c.length;
      if (bytes <= MAX_BASELINE_BYTES) chunks.push(c);
    });
    req.on("end", () => resolve(bytes > MAX_BASELINE_BYTES ? undefined : Buffer.concat(chunks).toString("utf8")));
    req.on("close", () => resolve(undefined));
    req.on("error", () => resolve(undefined));
  });
}
