import { decodeOps, err, ok, type ChangeOp, type Decoded, type Json, type JsonDocument, type LimitHit, type OpError, type StateLimits } from "../core/index.js";
import { invalidParams, limitExceeded, patchFailed, type CallError, type CallResult } from "../protocol/errors.js";
import type { Limits, Skipped } from "../protocol/types.js";
import { threadBytes, type Thread } from "../store/thread-store.js";

/**
 * The limits one document of a thread (its state, or one activity's content)
 * is held to. --max-state-bytes is the thread's (protocol/README.md §10): the
 * room a document has is the limit less what the thread's other documents
 * hold. `doc` is the document being changed, undefined for one being created.
 */
export function roomFor(limits: Readonly<Limits>, thread: Thread | undefined, doc: { bytes: number } | undefined): StateLimits {
  const others = thread ? threadBytes(thread) - (doc?.bytes ?? 0) : 0;
  return { maxDepth: limits.maxDepth, maxStateBytes: Math.max(0, limits.maxStateBytes - others) };
}

/**
 * -32003 for a document that hit its room: the room was the limit less the
 * thread's other documents (`others` bytes), so report the thread's figures.
 */
export function threadLimit(hit: LimitHit, others: number): CallError {
  return hit.limit === "maxStateBytes" ? limitExceeded("maxStateBytes", hit.max + others, hit.actual + others) : limitExceeded(hit.limit, hit.max, hit.actual);
}

/**
 * Applies ops the service built (openRun's namespace, a diff's ops) to one
 * document of `thread`, all or nothing, within its room; a failure is
 * reported for `field`, with the thread's figures.
 */
export function applyBuilt(limits: Readonly<Limits>, thread: Thread, doc: JsonDocument, ops: readonly ChangeOp[], field: string, adopt: boolean): CallResult<void> {
  const room = roomFor(limits, thread, doc);
  const out = doc.applyAtomic(ops.map((op): Decoded => ok(op)), { limits: room, normalize: false, adopt });
  return out.ok ? ok(undefined) : err(callError(out.error, field, limits.maxStateBytes - room.maxStateBytes));
}

/**
 * The error of a change the service built itself (openRun's state and
 * namespace, a diff's ops): a limit (protocol/README.md §7), or the target
 * that could not be written, reported for the param that named it (§6,
 * diffState's errors).
 */
export function callError(e: OpError, field: string, others = 0): CallError {
  if (e.limit) return threadLimit(e.limit, others);
  switch (e.code) {
    case "INVALID_INDEX":
    case "PATH_NOT_FOUND":
    case "INDEX_OUT_OF_BOUNDS":
    case "FORBIDDEN_KEY":
      return invalidParams(field, e.code, e.message);
    default:
      // The service builds no test, move or copy, and no malformed op: any other code is a bug.
      throw new Error(`an op built by the service did not apply: ${e.code}: ${e.message}`);
  }
}


/**
 * Decodes and applies ops as received (protocol/README.md §5) to one document:
 * a thread's state (applyOps) or an activity's content (applyActivityOps).
 * Lenient: skips are reported and later ops go on. Atomic: the first skip
 * fails the call with -32002 and the document is as it was.
 */
export function applyDecoded(doc: JsonDocument, raw: readonly Json[], atomic: boolean, limits: StateLimits): CallResult<{ applied: ChangeOp[]; skipped: Skipped }> {
  const decoded = decodeOps(raw);
  if (!atomic) return ok(doc.applyLenient(decoded, raw, { limits }));
  const out = doc.applyAtomic(decoded, { limits });
  return out.ok ? ok({ applied: out.value, skipped: [] }) : { ok: false, error: patchFailed(out.error.index, out.error.code, out.error.message) };
}
