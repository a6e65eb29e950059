import { stringifyJson } from "../json/stringify.js";
import { credentialOf, sameCredential, type Presented } from "./credentials.js";
import { parseId } from "./ids.js";
import type { RunInfo, RunLog, RunStart } from "./log.js";
import type { LoggedEvents } from "./logged.js";

/**
 * What a rejoin and a reload find in the run log (protocol/README.md §16), for the proxy
 * (proxy/resume.ts) and the stream methods (service/rejoins.ts) alike: one rule for who may read a
 * run, and one shape of what a reload replays.
 */

/** Who asks: the thread and agent path its request names, and the credentials it presents. */
export interface Asker {
  /** RunAgentInput.threadId of the request; undefined when its body could not be read (then nothing matches). */
  threadId: string | undefined;
  /** The agent's path, without the query (and, for a reload, without `/connect`). */
  path: string;
  presented: Presented;
}

/** What a run's log starts with, from the request that started it and its answer's head. */
export interface RunOrigin {
  threadId: string;
  path: string;
  presented: Presented;
  status: number;
  headers: Record<string, string>;
  /** RunAgentInput.state (the baseline) and .messages: a reload's prelude brings a client holding nothing to them. */
  state: unknown;
  messages: readonly unknown[];
  /** The id of the answer's opening block (Recorder.opening). */
  opening: string;
}

/** An SSE block whose data is `event`, for a reload's prelude (one line: JSON has no raw newline). */
const block = (event: unknown): string => `data: ${stringifyJson(event)}\n\n`;

export function runStart(key: Buffer, o: RunOrigin): RunStart {
  return {
    threadId: o.threadId,
    path: o.path,
    credential: credentialOf(key, o.presented),
    status: o.status,
    headers: o.headers,
    prelude: [block({ type: "STATE_SNAPSHOT", snapshot: o.state }), block({ type: "MESSAGES_SNAPSHOT", messages: o.messages })],
    opening: o.opening,
  };
}

/** The run, when the asker may read it: same thread, same agent path, same credentials. */
function allowed(key: Buffer, info: RunInfo | undefined, a: Asker): RunInfo | undefined {
  if (!info || a.threadId === undefined || info.threadId !== a.threadId || info.path !== a.path || !sameCredential(info.credential, credentialOf(key, a.presented))) return undefined;
  return info;
}

/** A dropped stream's rejoin: the run and the number of the last event its client had, or undefined for an unknown, expired, forged or refused id (one answer for all). */
export async function findRejoin(log: RunLog, key: Buffer, lastEventId: string, a: Asker): Promise<{ info: RunInfo; after: number } | undefined> {
  const at = parseId(lastEventId);
  if (!at) return undefined;
  // The run and the id at that number are asked for at once: on Redis, one round trip instead of two
  // before the first replayed event (B20). Nothing read is sent before the checks pass.
  const [found, logged] = await Promise.all([log.find(at.run), log.idAt(at.run, at.seq)]);
  const info = allowed(key, found, a);
  if (!info || logged !== lastEventId) return undefined;
  return { info, after: at.seq };
}

/** A reloaded page's connect: the thread's latest run at the agent's path, or undefined when there is none it may read. */
export async function findConnect(log: RunLog, key: Buffer, a: Asker): Promise<RunInfo | undefined> {
  const run = a.threadId === undefined ? undefined : await log.latest(a.threadId, a.path);
  return run === undefined ? undefined : allowed(key, await log.find(run), a);
}

/**
 * The text a rejoin is answered with, batch by batch as the log hands the events over: the events'
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
