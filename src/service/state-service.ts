import {
  JsonDocument,
  cloneJson,
  decodePath,
  diffMembers,
  diffNamespace,
  diffValue,
  err,
  forbidden,
  formatPointer,
  hasMember,
  isForbiddenStep,
  isObject,
  jsonEqual,
  normalize,
  ok,
  parsePointer,
  rootDiff,
  stateOverLimit,
  toWireOp,
  valueAt,
  type ChangeOp,
  type Decoded,
  type Json,
  type JsonObject,
  type StateLimits,
  type WireOp,
} from "../core/index.js";
import { invalidParams, limitExceeded, unknownThread, versionConflict, type CallError, type CallResult } from "../protocol/errors.js";
import { DEFAULT_LIMITS } from "../protocol/limits.js";
import type * as P from "../protocol/types.js";
import { ThreadStore, type Thread } from "../store/thread-store.js";
import * as activities from "./activities.js";
import { applyBuilt, applyDecoded, callError, roomFor } from "./room.js";

export interface ServiceOptions {
  limits?: Partial<P.Limits>;
  /** The program's version, reported by stats. */
  version?: string;
  /** Milliseconds since an arbitrary origin; injectable for tests. */
  now?: () => number;
  /**
   * The caller hands params over: it will neither read nor change them after
   * the call (the RPC layer parses fresh objects for every request and drops
   * them once the reply is written). The methods that write given values into
   * a mirror then keep them instead of copying them, which halves the memory a
   * large state costs on its way in:
   * - openRun: `state` and `toolState`;
   * - diffToolState: the values of `toolState` or `set`;
   * - activitySnapshot: `content`;
   * - diffActivity: `content` when it creates the activity, else the values
   *   its diff writes.
   * (applyOps, applyActivityOps and diffState always copy.) The `delta` of
   * diffToolState and of diffActivity carries the very values kept, so those
   * results share them with the mirror whatever sharesResults says: set both
   * or neither, as the RPC layer does. Default false: in-process callers keep
   * their objects, and nothing in the mirror aliases them.
   */
  ownsInput?: boolean;
  /**
   * The caller serializes each result before its next call and keeps no
   * reference to it (the RPC layer encodes every reply as soon as its call
   * returns). Results may then share values with the mirror instead of
   * copying them. The methods that return the mirror's own values then:
   * - getState: `state`;
   * - openRun: the STATE_SNAPSHOT's `snapshot`, and the namespace map in its
   *   `delta` (and its STATE_DELTA);
   * - getActivity: `content`;
   * - activitySnapshot, and diffActivity when it creates the activity: the
   *   ACTIVITY_SNAPSHOT's `content`.
   * Under the soak's workload those copies were a sizeable share of
   * everything the process allocated (docs/benchmarks.md, "Figures behind
   * choices in the source"). Default false.
   */
  sharesResults?: boolean;
  /**
   * Where the mirrors live. Default: a new store of `limits.maxThreads`. A
   * caller that passes its own can look at the mirrors themselves, not copies.
   */
  store?: ThreadStore;
}

const deltaEvents = (delta: WireOp[]): P.AguiEvent[] => (delta.length ? [{ type: "STATE_DELTA", delta }] : []);

/**
 * Every method of protocol/README.md §6 over a ThreadStore, with typed params and
 * results; failures are CallError values. Knows nothing of JSON-RPC: the
 * RPC layer checks params against the schema, calls this, and encodes.
 */
/** What stats reports of the stream methods and the run log (protocol/README.md §14, §16.x). */
export type StreamCounts = Pick<P.StatsResult, "streams" | "streamsEvicted" | "runs" | "runBytes" | "runsEvicted" | "reads">;
const NO_STREAMS: StreamCounts = { streams: 0, streamsEvicted: 0, runs: 0, runBytes: 0, runsEvicted: 0, reads: 0 };

export class StateService implements activities.ActivityContext {
  /** The limits in force, reported by stats (protocol/README.md §7). */
  readonly limits: Readonly<P.Limits>;
  private readonly store: ThreadStore;
  private readonly stateLimits: StateLimits;
  private readonly version: string;
  private readonly now: () => number;
  private readonly started: number;
  /** Keep given values instead of copying them (ServiceOptions.ownsInput). */
  readonly adopt: boolean;
  /** A copy of a mirror value for a result, unless results may share it (ServiceOptions.sharesResults). */
  readonly out: (v: Json) => Json;

  constructor(options: ServiceOptions = {}) {
    this.adopt = options.ownsInput ?? false;
    this.out = options.sharesResults ? (v) => v : cloneJson;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.stateLimits = { maxDepth: this.limits.maxDepth, maxStateBytes: this.limits.maxStateBytes };
    this.store = options.store ?? new ThreadStore(this.limits.maxThreads);
    this.version = options.version ?? "0.0.0";
    this.now = options.now ?? (() => performance.now());
    this.started = this.now();
  }

  openRun(p: P.OpenRunParams): CallResult<P.OpenRunResult> {
    const existing = this.store.get(p.threadId);
    const current = existing.ok ? existing.value : undefined;
    const conflict = this.checkVersion(current?.version ?? 0, p.ifVersion);
    if (conflict) return err(conflict);
    // The namespace named, else the one remembered, else "toolState" when a map is given.
    const namespace = p.namespace ?? current?.namespace ?? (p.toolState !== undefined ? "toolState" : undefined);
    const ns = p.namespace;
    if (ns !== undefined && isForbiddenStep(undefined, ns)) return err(invalidParams("/namespace", "FORBIDDEN_KEY", `namespace ${JSON.stringify(ns)} is a forbidden key`));

    // protocol/README.md §11: a thread's state is an object, always; a mirror never holds anything else.
    if (p.state !== undefined && !isObject(p.state)) return err(invalidParams("/state", "ROOT_NOT_OBJECT", "state must be a JSON object (protocol/README.md §11)"));

    // Build the new mirror first, on the side, so a refused call changes nothing.
    const ops: Decoded[] = [];
    if (p.state !== undefined) ops.push({ ok: true, value: { op: "replace", path: [], value: p.state } });
    const root = (p.state ?? current?.doc.root ?? {}) as JsonObject;
    if (namespace !== undefined) {
      if (p.toolState !== undefined) ops.push({ ok: true, value: { op: "add", path: [namespace], value: p.toolState } });
      else if (!hasMember(root, namespace)) ops.push({ ok: true, value: { op: "add", path: [namespace], value: {} } });
      else if (!isObject(root[namespace] as Json)) return err(invalidParams(p.state !== undefined ? "/state" : "/threadId", "NAMESPACE_NOT_OBJECT", `state member ${JSON.stringify(namespace)} must be an object in namespace mode`));
    }

    // A new thread is built on the side and stored only once it is valid, so a
    // refused openRun neither creates it nor evicts another thread to make room.
    const doc = current ? current.doc : new JsonDocument({});
    // Writes replace slots rather than mutate the values in them, so these
    // references still hold the old root and the old namespace map afterwards.
    const before = doc.root;
    const nsBefore = namespace !== undefined && isObject(before) && hasMember(before, namespace) ? before[namespace] : undefined;
    const room = this.room(current, current?.doc);
    const out = doc.applyAtomic(ops, { limits: room, normalize: false, adopt: this.adopt });
    if (!out.ok) return err(callError(out.error, out.error.index === 0 && p.state !== undefined ? "/state" : "/toolState", this.limits.maxStateBytes - room.maxStateBytes));
    const thread = current ?? this.store.open(p.threadId);
    thread.doc = doc;
    const after = thread.doc.root;
    const changed =
      p.state !== undefined
        ? !jsonEqual(before, after)
        : ops.length > 0 && (nsBefore === undefined || !jsonEqual(nsBefore, (after as JsonObject)[namespace as string] as Json));
    if (changed) thread.version++;
    if (namespace !== undefined) thread.namespace = namespace;

    const events: P.AguiEvent[] = [];
    if (p.snapshot) events.push({ type: "STATE_SNAPSHOT", snapshot: this.out(thread.doc.root) });
    let delta: WireOp[] = [];
    if (thread.namespace !== undefined) {
      // protocol/README.md §6: the resynchronization point is one add of the whole namespace.
      const map = (thread.doc.root as JsonObject)[thread.namespace] as Json;
      delta = [{ op: "add", path: formatPointer([thread.namespace]), value: this.out(map) }];
      events.push({ type: "STATE_DELTA", delta });
    }
    const result: P.OpenRunResult = { threadId: p.threadId, version: thread.version, delta, events };
    if (p.runId !== undefined) result.runId = p.runId;
    return ok(result);
  }

  diffToolState(p: P.DiffToolStateParams): CallResult<P.DiffToolStateResult> {
    const found = this.thread(p.threadId, p.ifVersion);
    if (!found.ok) return found;
    const thread = found.value;
    if (thread.namespace === undefined) return err(invalidParams("/threadId", "NOT_NAMESPACE_MODE", "diffToolState needs a thread in namespace mode: call openRun with namespace or toolState"));
    if (p.toolState !== undefined && (p.set !== undefined || p.remove !== undefined)) {
      return err(invalidParams("/toolState", "CONFLICTING_PARAMS", "give either toolState (the whole map) or set/remove, not both"));
    }
    const set = p.set ?? {};
    const both = p.remove?.findIndex((k) => hasMember(set, k)) ?? -1;
    if (both >= 0) return err(invalidParams(`/remove/${both}`, "CONFLICTING_PARAMS", `key ${JSON.stringify(p.remove?.[both])} is in both set and remove`));
    const root = thread.doc.root;
    const old = isObject(root) ? root[thread.namespace] : undefined;
    if (old === undefined || !isObject(old)) {
      // applyOps or diffState may have removed or replaced the namespace member.
      return err(invalidParams("/threadId", "NAMESPACE_NOT_OBJECT", `state member ${JSON.stringify(thread.namespace)} is not an object any more; call openRun to resynchronize`));
    }
    const base = [thread.namespace];
    const ops = p.toolState !== undefined ? diffNamespace(old, p.toolState, base) : diffMembers(old, set, p.remove ?? [], base);
    // Each key is written once, so a value kept here is never changed later in this call.
    return this.commit(thread, ops, "/toolState", this.adopt);
  }

  applyOps(p: P.ApplyOpsParams): CallResult<P.ApplyOpsResult> {
    if (p.ops.length > this.limits.maxOps) return err(limitExceeded("maxOps", this.limits.maxOps, p.ops.length));
    const found = this.thread(p.threadId, p.ifVersion);
    if (!found.ok) return found;
    const thread = found.value;
    const out = applyDecoded(thread.doc, p.ops, p.atomic ?? false, this.room(thread, thread.doc));
    if (!out.ok) return out;
    if (out.value.applied.length) thread.version++;
    const delta = out.value.applied.map(toWireOp);
    return ok({ version: thread.version, delta, skipped: out.value.skipped, events: deltaEvents(delta) });
  }

  normalize(p: P.NormalizeParams): CallResult<P.NormalizeResult> {
    if (p.ops.length > this.limits.maxOps) return err(limitExceeded("maxOps", this.limits.maxOps, p.ops.length));
    // The given state is held to the limits of a thread's state, as openRun's is.
    if (p.state !== undefined && !isObject(p.state)) return err(invalidParams("/state", "ROOT_NOT_OBJECT", "state must be a JSON object (protocol/README.md §11)"));
    const over = stateOverLimit(p.state ?? {}, this.stateLimits);
    if (over) return err(limitExceeded(over.limit, over.max, over.actual));
    return ok(normalize(p.ops, p.state ?? {}, this.stateLimits));
  }

  diffState(p: P.DiffStateParams): CallResult<P.DiffStateResult> {
    const path = this.path(p.path);
    if (!path.ok) return path;
    const found = this.thread(p.threadId, p.ifVersion);
    if (!found.ok) return found;
    const thread = found.value;
    const at = valueAt(thread.doc.root, path.value);
    let ops: ChangeOp[];
    if (path.value.length === 0) {
      // protocol/README.md §11: the root stays an object, and no op names it.
      if (!isObject(p.value)) return err(invalidParams("/value", "ROOT_NOT_OBJECT", "the value at the root must be a JSON object (protocol/README.md §11)"));
      const diff = rootDiff(thread.doc.root, p.value);
      if (!Array.isArray(diff)) return err(invalidParams("/value", diff.code, diff.message));
      ops = diff;
    } else if (at.ok) ops = diffValue(at.value, p.value, path.value);
    // A missing member or the element just past the end: set it with one add.
    else if ((at.error.code === "PATH_NOT_FOUND" || at.error.code === "INDEX_OUT_OF_BOUNDS") && valueAt(thread.doc.root, path.value.slice(0, -1)).ok) ops = [{ op: "add", path: path.value, value: p.value }];
    else return err(invalidParams("/path", at.error.code, at.error.message));
    return this.commit(thread, ops, "/path");
  }

  getState(p: P.GetStateParams): CallResult<P.GetStateResult> {
    const path = this.path(p.path);
    if (!path.ok) return path;
    const found = this.thread(p.threadId, undefined);
    if (!found.ok) return found;
    const at = valueAt(found.value.doc.root, path.value);
    if (!at.ok) return err(invalidParams("/path", at.error.code, at.error.message));
    return ok({ version: found.value.version, state: this.out(at.value) });
  }

  closeThread(p: P.CloseThreadParams): CallResult<P.CloseThreadResult> {
    return ok({ closed: this.store.close(p.threadId) });
  }

  escapePointer(p: P.EscapePointerParams): CallResult<P.EscapePointerResult> {
    const path = decodePath(p.path);
    if (!path.ok) return err(invalidParams("/path", path.error.code, path.error.message));
    return ok({ pointer: formatPointer(path.value) });
  }

  parsePointer(p: P.ParsePointerParams): CallResult<P.ParsePointerResult> {
    const path = parsePointer(p.pointer);
    if (!path.ok) return err(invalidParams("/pointer", "INVALID_POINTER", path.error.message));
    return ok({ path: path.value });
  }

  /** `requests` is what the transport has counted (protocol/README.md §6 stats): the service sees calls, not messages. */
  // ------------------------------------------------------------ activities (protocol/README.md §10)

  activitySnapshot(p: P.ActivitySnapshotParams): CallResult<P.ActivitySnapshotResult> {
    const found = this.thread(p.threadId, p.ifVersion);
    return found.ok ? activities.activitySnapshot(this, found.value, p) : found;
  }

  applyActivityOps(p: P.ApplyActivityOpsParams): CallResult<P.ApplyActivityOpsResult> {
    if (p.ops.length > this.limits.maxOps) return err(limitExceeded("maxOps", this.limits.maxOps, p.ops.length));
    const found = this.thread(p.threadId, p.ifVersion);
    return found.ok ? activities.applyActivityOps(this, found.value, p) : found;
  }

  diffActivity(p: P.DiffActivityParams): CallResult<P.DiffActivityResult> {
    const found = this.thread(p.threadId, p.ifVersion);
    return found.ok ? activities.diffActivity(this, found.value, p) : found;
  }

  getActivity(p: P.GetActivityParams): CallResult<P.GetActivityResult> {
    const found = this.thread(p.threadId, undefined);
    return found.ok ? activities.getActivity(this, found.value, p) : found;
  }

  /**
   * Evicts least recently used threads, the most recent one always kept,
   * until their states' bytes (as `stats.stateBytes` counts them) add up to
   * `bytes`: what a heap ceiling does before the heap runs out
   * (protocol/README.md §7). Returns the ids evicted, oldest first.
   */
  shed(bytes: number): string[] {
    return this.store.shed(bytes);
  }

  /** Sum of the threads' state bytes, as stats reports it. */
  stateBytes(): number {
    return this.store.stateBytes();
  }

  /** `streams` are the stream service's counts (protocol/README.md §14, §16.x); this service holds threads only. */
  stats(requests: number, streams: StreamCounts = NO_STREAMS): CallResult<P.StatsResult> {
    return ok({
      threads: this.store.size,
      stateBytes: this.store.stateBytes(),
      requests,
      uptimeMs: Math.round(this.now() - this.started),
      limits: { ...this.limits },
      version: this.version,
      evicted: this.store.evicted,
      activities: this.store.activities(),
      streams: streams.streams,
      streamsEvicted: streams.streamsEvicted,
      runs: streams.runs,
      runBytes: streams.runBytes,
      runsEvicted: streams.runsEvicted,
      reads: streams.reads,
    });
  }

  // ------------------------------------------------------------ helpers

  /** The limits a document of `thread` is held to: --max-state-bytes less its other documents (§10). */
  private room(thread: Thread | undefined, doc: JsonDocument | undefined): StateLimits {
    return roomFor(this.limits, thread, doc);
  }

  private checkVersion(actual: number, expected: number | undefined): CallError | undefined {
    return expected !== undefined && expected !== actual ? versionConflict(expected, actual) : undefined;
  }

  private thread(id: string, ifVersion: number | undefined): CallResult<Thread> {
    const found = this.store.get(id);
    if (!found.ok) return err(unknownThread(id, found.error));
    const conflict = this.checkVersion(found.value.version, ifVersion);
    return conflict ? err(conflict) : found;
  }

  /** A pointer param, checked with the params (protocol/README.md §6, the order of checks, step 6). */
  private path(raw: P.PointerOrPath | undefined): CallResult<string[]> {
    if (raw === undefined) return ok([]);
    const path = decodePath(raw);
    if (!path.ok) return err(invalidParams("/path", path.error.code, path.error.message));
    if (path.value.length > this.limits.maxDepth) return err(limitExceeded("maxDepth", this.limits.maxDepth, path.value.length));
    const bad = forbidden(path.value);
    if (bad) return err(invalidParams("/path", bad.code, bad.message));
    return path;
  }

  /** Applies ops the service built, all or nothing; bumps the version when something moved. */
  private commit(thread: Thread, ops: ChangeOp[], field: string, adopt = false): CallResult<P.ChangeResult> {
    const out = applyBuilt(this.limits, thread, thread.doc, ops, field, adopt);
    if (!out.ok) return out;
    if (ops.length) thread.version++;
    const delta = ops.map(toWireOp);
    return ok({ version: thread.version, delta, events: deltaEvents(delta) });
  }
}
