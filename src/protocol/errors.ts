import type { Result, SkipCode } from "../core/index.js";
import type { InvalidParamsData, InvalidParamsReason, LimitExceededData, PatchFailedData, ResumeUnknownData, UnknownActivityData, UnknownReadData, UnknownStreamData, UnknownThreadData, VersionConflictData } from "./types.generated.js";

/**
 * protocol/README.md §8: the codes of the application errors, by the names
 * the document's components.errors gives them. They sit in -32001..-32008,
 * the range JSON-RPC 2.0 §5.1 leaves to implementations.
 */
export const APPLICATION_ERROR_CODES = {
  UnknownThread: -32001,
  PatchFailed: -32002,
  LimitExceeded: -32003,
  VersionConflict: -32004,
  UnknownActivity: -32005,
  UnknownStream: -32006,
  ResumeUnknown: -32007,
  UnknownRead: -32008,
} as const;

/**
 * A call that failed, as a value rather than an exception: which error (by
 * its name in components.errors), a message for people, and the error's data
 * as protocol/README.md §8 gives it. It carries no JSON-RPC code: the rpc
 * layer gives each kind its number.
 */
export type CallError =
  | { kind: "UnknownThread"; message: string; data: UnknownThreadData }
  | { kind: "PatchFailed"; message: string; data: PatchFailedData }
  | { kind: "LimitExceeded"; message: string; data: LimitExceededData }
  | { kind: "VersionConflict"; message: string; data: VersionConflictData }
  | { kind: "UnknownActivity"; message: string; data: UnknownActivityData }
  | { kind: "UnknownStream"; message: string; data: UnknownStreamData }
  | { kind: "ResumeUnknown"; message: string; data: ResumeUnknownData }
  | { kind: "UnknownRead"; message: string; data: UnknownReadData }
  | { kind: "InvalidParams"; message: string; data: InvalidParamsData };

/** What a method returns: its result, or why the call failed. */
export type CallResult<T> = Result<T, CallError>;

export const unknownThread = (threadId: string, reason: UnknownThreadData["reason"]): CallError => ({
  kind: "UnknownThread",
  message: `unknown thread ${JSON.stringify(threadId)} (${reason}); call openRun with the state again`,
  data: { code: "UNKNOWN_THREAD", threadId, reason },
});

/** protocol/README.md §10: the thread holds no activity with this messageId. */
export const unknownActivity = (threadId: string, messageId: string): CallError => ({
  kind: "UnknownActivity",
  message: `thread ${JSON.stringify(threadId)} has no activity ${JSON.stringify(messageId)}; create it with activitySnapshot or diffActivity`,
  data: { code: "UNKNOWN_ACTIVITY", threadId, messageId },
});

/** protocol/README.md §14: no open stream has this id; nothing resumes it, so the caller sends the rest as it is. */
export const unknownStream = (streamId: string, reason: UnknownStreamData["reason"]): CallError => ({
  kind: "UnknownStream",
  message: `unknown stream ${JSON.stringify(streamId)} (${reason}); send the rest of the response as it is`,
  data: { code: "UNKNOWN_STREAM", streamId, reason },
});

/**
 * protocol/README.md §16: nothing to rejoin. One answer for an unknown, expired, forged or refused
 * id and for a thread with no run, so a refusal tells nothing; `status` is what to answer over HTTP.
 */
export const resumeUnknown = (answer: Pick<ResumeUnknownData, "status" | "headers" | "body">): CallError => ({
  kind: "ResumeUnknown",
  message: answer.status === 410 ? "no run to resume from this Last-Event-ID: it is unknown, expired, or not yours; answer 410" : "no run of this thread to connect to; answer 204",
  data: { code: "RESUME_UNKNOWN", status: answer.status, headers: answer.headers, body: answer.body },
});

/** protocol/README.md §16: no open read has this id; the rejoin's response cannot be completed. */
export const unknownRead = (readId: string, reason: UnknownReadData["reason"]): CallError => ({
  kind: "UnknownRead",
  message: `unknown read ${JSON.stringify(readId)} (${reason}); break the rejoin's response off`,
  data: { code: "UNKNOWN_READ", readId, reason },
});

/** protocol/README.md §8: `data.code` is the failing op's skip code, not the error's name. */
export const patchFailed = (index: number, code: SkipCode, message: string): CallError => ({
  kind: "PatchFailed",
  message: `op ${index} did not apply, so none did: ${message}`,
  data: { code, index, message },
});

export const limitExceeded = (limit: LimitExceededData["limit"], max: number, actual: number): CallError => ({
  kind: "LimitExceeded",
  message: `${limit} is ${max}; this call would need ${actual}`,
  data: { code: "LIMIT_EXCEEDED", limit, max, actual },
});

export const versionConflict = (expected: number, actual: number): CallError => ({
  kind: "VersionConflict",
  message: `ifVersion is ${expected} but the thread is at version ${actual}`,
  data: { code: "VERSION_CONFLICT", expected, actual },
});

/** `field` is an escaped JSON pointer into the params object, e.g. "/path" (protocol/README.md §8). */
export const invalidParams = (field: string, reason: InvalidParamsReason, message?: string): CallError => ({
  kind: "InvalidParams",
  message: message ?? `invalid params: ${field || "params"} ${reason}`,
  data: { code: "INVALID_PARAMS", field, reason },
});
