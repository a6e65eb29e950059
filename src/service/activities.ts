import { JsonDocument, cloneJson, isObject, jsonEqual, ok, err, rootDiff, stateOverLimit, toWireOp, type Json, type JsonObject, type WireOp } from "../core/index.js";
import { invalidParams, unknownActivity, type CallResult } from "../protocol/errors.js";
import type * as P from "../protocol/types.js";
import type { Activity, Thread } from "../store/thread-store.js";
import { applyBuilt, applyDecoded, roomFor, threadLimit } from "./room.js";

/**
 * The four activity methods of protocol/README.md §10 on one thread, found
 * and version-checked by the caller. An activity's content is a document like
 * a thread's state: the same core normalizes, applies and diffs it, under the
 * same rules (§5, §11), so every ACTIVITY_DELTA patch applies as a
 * STATE_DELTA does. Activities share the thread's version and its
 * --max-state-bytes.
 */

/** What the activity methods need from the service. */
export interface ActivityContext {
  readonly limits: Readonly<P.Limits>;
  /** Keep given values instead of copying them (ServiceOptions.ownsInput). */
  readonly adopt: boolean;
  /** A mirror value for a result: a copy, or the value itself (ServiceOptions.sharesResults). */
  readonly out: (v: Json) => Json;
}

const notObject = (field: string) => invalidParams(field, "ROOT_NOT_OBJECT", "an activity's content must be a JSON object (protocol/README.md §10)");

function snapshotEvent(ctx: ActivityContext, messageId: string, a: Activity, replace: boolean | undefined): P.ActivitySnapshotEvent {
  const e: P.ActivitySnapshotEvent = { type: "ACTIVITY_SNAPSHOT", messageId, activityType: a.type, content: ctx.out(a.doc.root) as JsonObject };
  // The wire shape carries `replace` only when it is false (§10).
  if (replace === false) e.replace = false;
  return e;
}

/** A delta always carries the activity's type after the call (§10): the client takes it from the event. */
const deltaEvents = (messageId: string, a: Activity, patch: WireOp[], retyped: boolean): P.ActivityEvent[] => (patch.length > 0 || retyped ? [{ type: "ACTIVITY_DELTA", messageId, activityType: a.type, patch }] : []);

/**
 * Stores `content` as the activity's, created or replaced; checks the
 * thread's room first, so a refused call changes nothing. Returns whether
 * anything changed.
 */
function put(ctx: ActivityContext, thread: Thread, messageId: string, type: string, content: JsonObject): CallResult<{ activity: Activity; changed: boolean }> {
  const existing = thread.activities?.get(messageId);
  const room = roomFor(ctx.limits, thread, existing?.doc);
  const over = stateOverLimit(content, room);
  if (over) return err(threadLimit(over, ctx.limits.maxStateBytes - room.maxStateBytes));
  const changed = existing === undefined || existing.type !== type || !jsonEqual(existing.doc.root, content);
  if (!changed && existing) return ok({ activity: existing, changed });
  const activity: Activity = { type, doc: new JsonDocument(ctx.adopt ? content : (cloneJson(content) as JsonObject)) };
  (thread.activities ??= new Map()).set(messageId, activity);
  return ok({ activity, changed });
}

export function activitySnapshot(ctx: ActivityContext, thread: Thread, p: P.ActivitySnapshotParams): CallResult<P.ActivitySnapshotResult> {
  if (!isObject(p.content)) return err(notObject("/content"));
  const existing = thread.activities?.get(p.messageId);
  // replace: false leaves an existing activity exactly as it is, as the client
  // does. The event then carries what the mirror holds, so that a client which
  // lost the activity recreates the same one, and one which has it keeps it.
  if (existing && p.replace === false) return ok({ version: thread.version, events: [snapshotEvent(ctx, p.messageId, existing, false)] });
  const out = put(ctx, thread, p.messageId, p.activityType, p.content);
  if (!out.ok) return out;
  if (out.value.changed) thread.version++;
  // Created here, the event replaces whatever the client may hold: the mirror
  // knows nothing of it (a restarted sidecar, a reopened thread), and a client
  // that kept an older copy under replace: false would refuse every later
  // delta. So replace: false goes out only where it leaves the mirror's own.
  return ok({ version: thread.version, events: [snapshotEvent(ctx, p.messageId, out.value.activity, existing ? p.replace : undefined)] });
}

export function applyActivityOps(ctx: ActivityContext, thread: Thread, p: P.ApplyActivityOpsParams): CallResult<P.ApplyActivityOpsResult> {
  const a = thread.activities?.get(p.messageId);
  if (!a) return err(unknownActivity(thread.id, p.messageId));
  const out = applyDecoded(a.doc, p.ops, p.atomic ?? false, roomFor(ctx.limits, thread, a.doc));
  if (!out.ok) return out;
  // Retyped only once the ops have applied: a failed atomic call changes nothing.
  const retyped = p.activityType !== undefined && p.activityType !== a.type;
  if (retyped) a.type = p.activityType as string;
  const delta = out.value.applied.map(toWireOp);
  if (delta.length > 0 || retyped) thread.version++;
  return ok({ version: thread.version, delta, skipped: out.value.skipped, events: deltaEvents(p.messageId, a, delta, retyped) });
}

export function diffActivity(ctx: ActivityContext, thread: Thread, p: P.DiffActivityParams): CallResult<P.DiffActivityResult> {
  if (!isObject(p.content)) return err(notObject("/content"));
  const a = thread.activities?.get(p.messageId);
  if (!a) {
    // The snapshot-before-delta guard, on the emitter's side: the client has no baseline to patch.
    if (p.activityType === undefined) return err(invalidParams("/activityType", "MISSING", `activity ${JSON.stringify(p.messageId)} does not exist yet: activityType is required to create it`));
    const out = put(ctx, thread, p.messageId, p.activityType, p.content);
    if (!out.ok) return out;
    thread.version++;
    return ok({ version: thread.version, delta: [], events: [snapshotEvent(ctx, p.messageId, out.value.activity, undefined)] });
  }
  const ops = rootDiff(a.doc.root, p.content);
  if (!Array.isArray(ops)) return err(invalidParams("/content", ops.code, ops.message));
  const applied = applyBuilt(ctx.limits, thread, a.doc, ops, "/content", ctx.adopt);
  if (!applied.ok) return applied;
  const retyped = p.activityType !== undefined && p.activityType !== a.type;
  if (retyped) a.type = p.activityType as string;
  const delta = ops.map(toWireOp);
  if (delta.length > 0 || retyped) thread.version++;
  return ok({ version: thread.version, delta, events: deltaEvents(p.messageId, a, delta, retyped) });
}

export function getActivity(ctx: ActivityContext, thread: Thread, p: P.GetActivityParams): CallResult<P.GetActivityResult> {
  const a = thread.activities?.get(p.messageId);
  if (!a) return err(unknownActivity(thread.id, p.messageId));
  return ok({ version: thread.version, activityType: a.type, content: ctx.out(a.doc.root) as JsonObject });
}
