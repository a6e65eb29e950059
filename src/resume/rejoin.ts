import { stringifyJson } from "../json/stringify.js";
import { credentialOf, sameSecret } from "./credentials.js";
import { agentPath, keptHeaders, pathOf, refusal, threadOf, type HeaderMap, type Refusal, type RequestHead } from "./edge.js";
import { parseId } from "./ids.js";
import type { RunInfo, RunStart } from "./log.js";
import type { LoggedEvents } from "./logged.js";
import type { ResumeOptions } from "./recorder.js";

/**
 * What a rejoin and a reload find in the run log (protocol/README.md §16), for the proxy
 * (proxy/resume.ts) and the stream methods (service/rejoins.ts) alike: one rule for who may read a
 * run, and one shape of what a reload replays.
 */

/** What a run's log starts with, from the request that started it and its answer's head. */
export interface RunOrigin {
  /** RunAgentInput.threadId, as the body gave it (anything but a string of at most MAX_THREAD_ID units names no thread). */
  threadId: unknown;
  /** The request's path (query allowed) and headers. */
  request: RequestHead;
  status: number;
  /** The answer's headers, by lower-case name. */
  response: HeaderMap;
  /** RunAgentInput.state (the baseline) and .messages: a reload's prelude brings a client holding nothing to them. */
  state: unknown;
  messages: readonly unknown[];
  /** The id of the answer's opening block (Recorder.opening). */
  opening: string;
}

/** An SSE block whose data is `event`, for a reload's prelude (one line: JSON has no raw newline). */
const block = (event: unknown): string => `data: ${stringifyJson(event)}\n\n`;

export function runStart(opts: ResumeOptions, o: RunOrigin): RunStart {
  return {
    threadId: threadOf(o.threadId),
    path: pathOf(o.request.path),
    credential: credentialOf(opts.key, opts.policy, o.request.headers),
    status: o.status,
    headers: keptHeaders(o.response),
    prelude: [block({ type: "STATE_SNAPSHOT", snapshot: o.state }), block({ type: "MESSAGES_SNAPSHOT", messages: o.messages })],
    opening: o.opening,
  };
}

/** What to answer a rejoin or a reload with: the run to replay from after its `after`-th event, or the refusal. */
export type Resolution = { info: RunInfo; after: number; prelude: readonly string[]; refused?: undefined } | { refused: Refusal };

/**
 * A rejoin (Last-Event-ID) or a reload (/connect), decided. A rejoin is served when the id equals,
 * in full, the one the log holds at that run and number, the body names the run's thread and the
 * request its agent path, and the request presents the run's credential (any request, for a run
 * started with none: its ids are the capability). A reload needs a thread, and a run with a
 * credential, presented again (or the operator's `--connect-anonymous`). A run that ended broken
 * with nothing after the id is refused as well: its client would only be cut again, and a refusal
 * lets it fail at once (issue 38: a failed run rejoined four times a second until its log expired).
 * Every refusal is the same answer. Ids, threads and credentials are compared in constant time.
 */
export async function resolve(opts: ResumeOptions, kind: "rejoin" | "reload", req: RequestHead, bodyThreadId: unknown): Promise<Resolution> {
  const refused = { refused: refusal(kind) };
  const thread = threadOf(bodyThreadId);
  const path = agentPath(req, kind);
  const presented = credentialOf(opts.key, opts.policy, req.headers);
  if (kind === "rejoin") {
    const lastEventId = req.headers["last-event-id"] ?? "";
    const at = parseId(lastEventId);
    if (!at) return refused;
    // The run and the id at that number are asked for at once: on Redis, one round trip instead of two
    // before the first replayed event. Nothing read is sent before the checks pass.
    const [info, logged] = await Promise.all([opts.log.find(at.run), opts.log.idAt(at.run, at.seq)]);
    if (!info || logged === undefined || !sameSecret(logged, lastEventId) || !sameSecret(info.threadId, thread) || info.path !== path) return refused;
    if (info.credential !== "" && !sameSecret(info.credential, presented)) return refused;
    if (info.ended !== undefined && info.ended !== "finished" && at.seq >= info.events) return refused;
    return { info, after: at.seq, prelude: [] };
  }
  if (thread === "") return refused;
  const run = await opts.log.latest(thread, path);
  const info = run === undefined ? undefined : await opts.log.find(run);
  if (!info || !sameSecret(info.threadId, thread) || info.path !== path) return refused;
  if (info.credential === "" ? !opts.policy.connectAnonymous : !sameSecret(info.credential, presented)) return refused;
  return { info, after: 0, prelude: info.prelude };
}

/**
 * The text a rejoin is answered with, page by page as the log hands the events over: the events'
 * blocks, and a reload's prelude right after the first event (RUN_STARTED), so the client's pipeline
 * sees a run that starts as runs start and then the state and messages it began from.
 */
export class Replay {
  private pending: string | undefined;
  sent = 0;

  constructor(prelude: readonly string[]) {
    this.pending = prelude.length > 0 ? prelude.join("") : undefined;
  }

  text(events: LoggedEvents): string {
    this.sent += events.ends.length;
    const first = events.ends[0];
    if (this.pending === undefined || first === undefined) return events.text;
    const out = events.text.slice(0, first) + this.pending + events.text.slice(first);
    this.pending = undefined;
    return out;
  }
}
