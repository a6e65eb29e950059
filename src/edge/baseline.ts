import { isObject, type JsonObject } from "../core/json.js";
import { plainEncoding } from "./response.js";

/**
 * The baseline of a repaired answer (protocol/README.md §13, §14): the RunAgentInput.state of its
 * request, the state the client says it holds, read once, here, for the proxy's tap and for the
 * sidecar's openStream (the request form), which a middleware hands the body to as text.
 */

/** Why the baseline is {} rather than the request's state: a closed set, each with its one sentence. */
export type BaselineCode = "BODY_TOO_LARGE" | "BODY_NOT_JSON" | "BODY_ENCODED" | "STATE_NOT_OBJECT";

export interface Baseline {
  state: JsonObject;
  /** Set when the state is not the request's (it could not be read); undefined when it is, or when there is no body. */
  note: BaselineCode | undefined;
  /** RunAgentInput.threadId and .messages, when the body has them: what a resumable run is filed under and replays (protocol/README.md §16). */
  threadId?: string;
  messages?: unknown[];
  /** RunAgentInput.runId: what a RUN_STARTED the lifecycle repair sends carries, with threadId (issue 40). */
  runId?: string;
}

const SAID: Readonly<Record<BaselineCode, string>> = {
  BODY_TOO_LARGE: "the request body is too large to keep for its RunAgentInput.state",
  BODY_NOT_JSON: "the request body is not JSON",
  BODY_ENCODED: "the request body is content-encoded",
  STATE_NOT_OBJECT: "RunAgentInput.state is not an object",
};

/** The sentence a log says for a baseline that is not the request's state. */
export const baselineMessage = (code: BaselineCode): string => `${SAID[code]}; the repair starts from {} (its first snapshot sent whole is SNAPSHOT_REPLACES_UNKNOWN)`;

/** The baseline in a request body's text. */
export function baselineOf(text: string): Baseline {
  let input: unknown;
  try {
    // JSON.parse makes "__proto__" an own data member, as the client's JSON.parse does.
    input = JSON.parse(text);
  } catch {
    return { state: {}, note: "BODY_NOT_JSON" };
  }
  if (!isObject(input)) return { state: {}, note: undefined };
  const about: Pick<Baseline, "threadId" | "messages" | "runId"> = {};
  if (typeof input["threadId"] === "string") about.threadId = input["threadId"];
  if (typeof input["runId"] === "string") about.runId = input["runId"];
  if (Array.isArray(input["messages"])) about.messages = input["messages"];
  const state = input["state"];
  if (state === undefined || state === null) return { state: {}, note: undefined, ...about };
  return isObject(state) ? { state, note: undefined, ...about } : { state: {}, note: "STATE_NOT_OBJECT", ...about };
}

/**
 * The baseline of a request whose body is `body` (undefined: not kept, past the limit) in the
 * Content-Encoding `encoding`: an empty body has none, an encoded one is not read.
 */
export function baselineOfBody(body: string | undefined, encoding: string | undefined): Baseline {
  if (body === undefined) return { state: {}, note: "BODY_TOO_LARGE" };
  if (body === "") return { state: {}, note: undefined };
  if (!plainEncoding(encoding)) return { state: {}, note: "BODY_ENCODED" };
  return baselineOf(body);
}
