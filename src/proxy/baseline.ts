import type { IncomingMessage } from "node:http";
import { isObject, type JsonObject } from "../core/json.js";

/** Past this many bytes the body is not kept for its state: the baseline falls back to {} (and the log says so). */
export const MAX_BASELINE_BYTES = 64 * 1024 * 1024;

/** Why the baseline is {} rather than the request's state; undefined when it is the request's state (or there is no body). */
export type BaselineNote = "too-large" | "not-json" | "encoded" | "state-not-object" | undefined;

export interface Baseline {
  state: JsonObject;
  note: BaselineNote;
  /** RunAgentInput.threadId and .messages, when the body has them: what a resumable run is filed under and replays (protocol/README.md §16). */
  threadId?: string;
  messages?: unknown[];
}

/**
 * Keeps a copy of the request body as it streams to the upstream, so the
 * mirror can start from `RunAgentInput.state` when the answer is an event
 * stream. The body is forwarded as it arrives either way; only an SSE answer
 * waits for `read()`, which resolves when the body has ended.
 */
export class BodyTap {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private overflow = false;
  private readonly ended: Promise<void>;

  constructor(private readonly req: IncomingMessage) {
    this.ended = new Promise((resolve) => {
      req.on("end", resolve);
      // A body cut off by the client still settles: the connection is gone
      // and the response with it, so the baseline no longer matters.
      req.on("close", resolve);
    });
  }

  /** Called for every body chunk on its way upstream. */
  take(chunk: Buffer): void {
    if (this.overflow) return;
    this.bytes += chunk.length;
    if (this.bytes > MAX_BASELINE_BYTES) {
      this.overflow = true;
      this.chunks = [];
    } else this.chunks.push(chunk);
  }

  /** The state the client says it holds: RunAgentInput.state when it is an object, else {}. */
  async read(): Promise<Baseline> {
    await this.ended;
    if (this.overflow) return { state: {}, note: "too-large" };
    if (this.bytes === 0) return { state: {}, note: undefined };
    const encoding = this.req.headers["content-encoding"];
    if (encoding !== undefined && encoding !== "identity") return { state: {}, note: "encoded" };
    return baselineOf(Buffer.concat(this.chunks).toString("utf8"));
  }
}

/** The baseline in a request body's text. */
export function baselineOf(text: string): Baseline {
  let input: unknown;
  try {
    // JSON.parse makes "__proto__" an own data member, as the client's JSON.parse does.
    input = JSON.parse(text);
  } catch {
    return { state: {}, note: "not-json" };
  }
  if (!isObject(input)) return { state: {}, note: undefined };
  const about: Pick<Baseline, "threadId" | "messages"> = {};
  if (typeof input["threadId"] === "string") about.threadId = input["threadId"];
  if (Array.isArray(input["messages"])) about.messages = input["messages"];
  const state = input["state"];
  if (state === undefined || state === null) return { state: {}, note: undefined, ...about };
  return isObject(state) ? { state, note: undefined, ...about } : { state: {}, note: "state-not-object", ...about };
}
