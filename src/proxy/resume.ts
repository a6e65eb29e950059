import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Log } from "../log.js";
import type { Presented } from "../resume/credentials.js";
import type { RunEnd, RunInfo } from "../resume/log.js";
import { Recorder, type ResumeOptions } from "../resume/recorder.js";
import { findConnect, findRejoin, Replay, runStart, type Asker } from "../resume/rejoin.js";
import { baselineOf, MAX_BASELINE_BYTES, type Baseline } from "./baseline.js";

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

/** The credentials a request presents (§16): its Authorization header and its cookies. */
const presented = (req: IncomingMessage): Presented => ({ authorization: req.headers.authorization, cookie: req.headers.cookie });

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
    const recorder = new Recorder(this.opts.log, this.opts.graceMs, cancel, this.logger);
    const start = runStart(this.opts.key, {
      threadId: baseline.threadId ?? "",
      path: pathOf(req.url),
      presented: presented(req),
      status,
      headers: replayable(headers),
      state: baseline.state,
      messages: baseline.messages ?? [],
      opening: recorder.opening,
    });
    this.opts.log.begin(recorder.run, start).catch((e: unknown) => this.logger.error({ err: String(e), run: recorder.run }, "the run log could not open this run; it cannot be resumed"));
    return recorder;
  }

  /** Answers a rejoin or a reload from the log. The upstream is never called. */
  async serve(kind: "rejoin" | "connect", req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readBody(req);
    if (res.destroyed) return;
    const threadId = body === undefined ? undefined : (baselineOf(body).threadId ?? "");
    const path = pathOf(req.url);
    const asker = (at: string): Asker => ({ threadId, path: at, presented: presented(req) });
    if (kind === "rejoin") {
      const found = await findRejoin(this.opts.log, this.opts.key, req.headers["last-event-id"] as string, asker(path));
      if (!found) return this.refuse(res, kind, "unknown or refused Last-Event-ID");
      return this.replay(res, found.info, found.after, []);
    }
    const info = await findConnect(this.opts.log, this.opts.key, asker(path.slice(0, -CONNECT.length)));
    if (!info) return this.refuse(res, kind, "no run of this thread to connect to");
    return this.replay(res, info, 0, info.prelude);
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
    const replay = new Replay(prelude);
    const unfollow = await this.opts.log.follow(info.run, after, {
      events: (events) => {
        if (!res.destroyed) res.write(replay.text(events));
      },
      end: (reason: RunEnd) => {
        this.logger.info({ run: info.run, after, sent: replay.sent, reason }, "rejoin served");
        // Only a run that ended as its upstream ended it ends cleanly; any other end must look broken to the client.
        if (reason === "finished") res.end();
        else res.destroy();
      },
    });
    if (res.destroyed || res.writableEnded) unfollow();
    else res.once("close", unfollow);
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
