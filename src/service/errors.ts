import type { LimitName, SkipCode } from "../core/index.js";
import type { UnknownThreadReason } from "../store/thread-store.js";

/**
 * Numeric JSON-RPC error codes (protocol/README.md §2, §8). Application codes sit in
 * -32001..-32004, the range JSON-RPC 2.0 leaves to implementations.
 */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  UnknownThread: -32001,
  PatchFailed: -32002,
  LimitExceeded: -32003,
  VersionConflict: -32004,
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];


/**
 * What a method returns when it fails: a value, not an exception. `data.code`
 * is a stable string; the other members of `data` depend on the code:
 * - UNKNOWN_THREAD: threadId, reason
 * - PATCH_FAILED: the failing op's skip code in `code`, index, message (protocol/README.md §8)
 * - LIMIT_EXCEEDED: limit, max, actual
 * - VERSION_CONFLICT: expected, actual
 * - INVALID_PARAMS: field (a pointer into params), reason
 */
export interface ServiceError {
  code: ErrorCode;
  message: string;
  data: { code: string } & Record<string, unknown>;
}

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: ServiceError };

export const success = <T>(value: T): Outcome<T> => ({ ok: true, value });
export const failure = (error: ServiceError): { ok: false; error: ServiceError } => ({ ok: false, error });

export const unknownThread = (threadId: string, reason: UnknownThreadReason): ServiceError => ({
  code: ErrorCode.UnknownThread,
  message: `unknown thread ${JSON.stringify(threadId)} (${reason}); call openRun with the state again`,
  data: { code: "UNKNOWN_THREAD", threadId, reason },
});

export const patchFailed = (index: number, code: SkipCode, message: string): ServiceError => ({
  code: ErrorCode.PatchFailed,
  message: `op ${index} did not apply, so none did: ${message}`,
  data: { code, index, message },
});

export const limitExceeded = (limit: LimitName, max: number, actual: number): ServiceError => ({
  code: ErrorCode.LimitExceeded,
  message: `${limit} is ${max}; this call would need ${actual}`,
  data: { code: "LIMIT_EXCEEDED", limit, max, actual },
});

export const versionConflict = (expected: number, actual: number): ServiceError => ({
  code: ErrorCode.VersionConflict,
  message: `ifVersion is ${expected} but the thread is at version ${actual}`,
  data: { code: "VERSION_CONFLICT", expected, actual },
});

/** `field` is a JSON pointer into the params object, e.g. "/path". */
export const invalidParams = (field: string, reason: string, message?: string): ServiceError => ({
  code: ErrorCode.InvalidParams,
  message: message ?? `invalid params: ${field || "params"} ${reason}`,
  data: { code: "INVALID_PARAMS", field, reason },
});
