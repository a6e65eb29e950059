import {
  applyAtomic,
  applyLenient,
  cloneJson,
  decodeOps,
  decodePath,
  diffMembers,
  diffNamespace,
  diffValue,
  formatPointer,
  hasMember,
  isForbiddenStep,
  isObject,
  jsonEqual,
  newDoc,
  normalize,
  parsePointer,
  stateOverLimit,
  toWireOp,
  valueAt,
  type ApplyLimits,
  type Decoded,
  type Json,
  type JsonObject,
  type Op,
  type OpError,
  type WireOp,
} from "../core/index.js";
import type * as P from "../protocol/types.js";
import { ThreadStore, type Thread } from "../store/thread-store.js";
import {
  failure,
  invalidParams,
  limitExceeded,
  patchFailed,
  success,
  unknownThread,
  versionConflict,
  type Outcome,
  type ServiceError,
} from "./errors.js";

export const DEFAULT_LIMITS: P.Limits = {
  maxMessageBytes: 64 * 1024 * 1024,
  maxOps: 10_000,
  maxDepth: 256,
  maxStateBytes: 32 * 1024 * 1024,
  maxThreads: 10_000,
};

export interface ServiceOptions {
  limits?: Partial<P.Limits>;
  /** The program's version, reported by stats. */
  version?: string;
  /** Milliseconds since an arbitrary origin; injectable for tests. */
  now?: () => number;
  /**
   * The caller hands params over: it will neither read nor change them after
   * the call (the RPC layer parses fresh objects for every request and drops
   * them once the reply is written). openRun and diffToolState then keep the
   * values they are given instead of copying them, which halves the memory a
   * large state costs on its way in. Default false: in-process callers keep
   * their objects, and nothing in the mirror aliases them.
   */
  ownsInput?: boolean;
}

const deltaEvents = (delta: WireOp[]): P.AguiEvent[] => (delta.length ? [{ type: "STATE_DELTA", delta }] : []);

/** Maps a core error met outside a lenient applyOps to the call's error. */
function callError(e: OpError, field: string): ServiceError {
  if (e.limit) return limitExceeded(e.limit.limit, e.limit.max, e.limit.actual);
  return invalidParams(field, e.code, e.message);
}

/**
 * Every method of protocol/README.md §6 over a ThreadStore, with typed params and
 * results; failures are ServiceError values. Knows nothing of JSON-RPC: the
 * RPC layer validates params against the schema, calls this, and encodes.
 */
export class StateService {
  readonly limits: P.Limits;
  readonly store: ThreadStore;
  /** Requests seen by the transport; reported by stats. */
  requests = 0;
  private readonly applyLimits: ApplyLimits;
  private readonly version: string;
  private readonly now: () => number;
  private readonly started: number;
  private readonly adopt: boolean;

  constructor(options: ServiceOptions = {}) {
    this.adopt = options.ownsInput ?? false;
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.applyLimits = { maxDepth: this.limits.maxDepth, maxStateBytes: this.limits.maxStateBytes };
    this.store = new ThreadStore(this.limits.maxThreads);
    this.version = options.version ?? "0.0.0";
    this.now = options.now ?? (() => performance.now());
    this.started = this.now();
  }

  openRun(p: P.OpenRunParams): Outcome<P.OpenRunResult> {
    const existing = this.store.get(p.threadId);
    const current = existing.ok ? existing.thread : undefined;
    const conflict = this.checkVersion(current?.version ?? 0, p.ifVersion);
    if (conflict) return failure(conflict);
    // The namespace named, else the one remembered, else "toolState" when a map is given.
    const namespace = p.namespace ?? current?.namespace ?? (p.toolState !== undefined ? "toolState" : undefined);
    const ns = p.namespace;
    if (ns !== undefined && isForbiddenStep(undefined, ns)) return failure(invalidParams("/namespace", "FORBIDDEN_KEY", `namespace ${JSON.stringify(ns)} is a forbidden key`));

    // Build the new mirror first, on the side, so a refused call changes nothing.
    const ops: Decoded[] = [];
    if (p.state !== undefined) ops.push({ ok: true, value: { op: "replace", path: [], value: p.state } });
    const root = p.state !== undefined ? p.state : current?.doc.root ?? {};
    if (namespace !== undefined) {
      if (!isObject(root)) {
        const field = p.state !== undefined ? "/state" : p.namespace !== undefined ? "/namespace" : p.toolState !== undefined ? "/toolState" : "/threadId";
        return failure(invalidParams(field, "ROOT_NOT_OBJECT", "namespace mode needs a state whose root is an object"));
      }
      if (p.toolState !== undefined) ops.push({ ok: true, value: { op: "add", path: [namespace], value: p.toolState } });
      else if (!hasMember(root, namespace)) ops.push({ ok: true, value: { op: "add", path: [namespace], value: {} } });
      else if (!isObject(root[namespace] as Json)) return failure(invalidParams(p.state !== undefined ? "/state" : "/threadId", "NAMESPACE_NOT_OBJECT", `state member ${JSON.stringify(namespace)} must be an object in namespace mode`));
    }

    // A new thread is built on the side and stored only once it is valid, so a
    // refused openRun neither creates it nor evicts another thread to make room.
    const doc = current ? current.doc : newDoc({});
    // Writes replace slots rather than mutate the values in them, so these
    // references still hold the old root and the old namespace map afterwards.
    const before = doc.root;
    const nsBefore = namespace !== undefined && isObject(before) && hasMember(before, namespace) ? before[namespace] : undefined;
    const out = applyAtomic(doc, ops, { limits: this.applyLimits, normalize: false, adopt: this.adopt });
    if (!out.ok) return failure(callError(out.error, out.index === 0 && p.state !== undefined ? "/state" : "/toolState"));
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
    if (p.snapshot) events.push({ type: "STATE_SNAPSHOT", snapshot: cloneJson(thread.doc.root) });
    let delta: WireOp[] = [];
    if (thread.namespace !== undefined) {
      // protocol/README.md §6: the resynchronization point is one add of the whole namespace.
      const map = (thread.doc.root as JsonObject)[thread.namespace] as Json;
      delta = [{ op: "add", path: formatPointer([thread.namespace]), value: cloneJson(map) }];
      events.push({ type: "STATE_DELTA", delta });
    }
    const result: P.OpenRunResult = { threadId: p.threadId, version: thread.version, delta, events };
    if (p.runId !== undefined) result.runId = p.runId;
    return success(result);
  }

  diffToolState(p: P.DiffToolStateParams): Outcome<P.ChangeResult> {
    const found = this.thread(p.threadId, p.ifVersion);
    if (!found.ok) return found;
    const thread = found.value;
    if (thread.namespace === undefined) return failure(invalidParams("/threadId", "NOT_NAMESPACE_MODE", "diffToolState needs a thread in namespace mode: call openRun with namespace or toolState"));
    if (p.toolState !== undefined && (p.set !== undefined || p.remove !== undefined)) {
      return failure(invalidParams("/toolState", "CONFLICTING_PARAMS", "give either toolState (the whole map) or set/remove, not both"));
    }
    const set = p.set ?? {};
    const both = p.remove?.findIndex((k) => hasMember(set, k)) ?? -1;
    if (both >= 0) return failure(invalidParams(`/remove/${both}`, "CONFLICTING_PARAMS", `key ${JSON.stringify(p.remove?.[both])} is in both set and remove`));
    const root = thread.doc.root;
    const old = isObject(root) ? root[thread.namespace] : undefined;
    if (old === undefined || !isObject(old)) {
      // applyOps or diffState may have removed or replaced the namespace member.
      return failure(invalidParams("/threadId", "NAMESPACE_NOT_OBJECT", `state member ${JSON.stringify(thread.namespace)} is not an object any more; call openRun to resynchronize`));
    }
    const base = [thread.namespace];
    const ops = p.toolState !== undefined ? diffNamespace(old, p.toolState, base) : diffMembers(old, set, p.remove ?? [], base);
    // Each key is written once, so a value kept here is never changed later in this call.
    return this.commit(thread, ops, "/toolState", this.adopt);
  }

  applyOps(p: P.ApplyOpsParams): Outcome<P.ApplyOpsResult> {
    if (p.ops.length > this.limits.maxOps) return failure(limitExceeded("maxOps", this.limits.maxOps, p.ops.length));
    const found = this.thread(p.threadId, p.ifVersion);
    if (!found.ok) return found;
    const thread = found.value;
    const decoded = decodeOps(p.ops);
    let applied: Op[];
    let skipped: P.ApplyOpsResult["skipped"] = [];
    if (p.atomic) {
      const out = applyAtomic(thread.doc, decoded, { limits: this.applyLimits });
      if (!out.ok) return failure(patchFailed(out.index, out.error.code, out.error.message));
      applied = out.applied;
    } else {
      ({ applied, skipped } = applyLenient(thread.doc, decoded, p.ops, { limits: this.applyLimits }));
    }
    if (applied.length) thread.version++;
    const delta = applied.map(toWireOp);
    return success({ version: thread.version, delta, skipped, events: deltaEvents(delta) });
  }

  normalize(p: P.NormalizeParams): Outcome<P.NormalizeResult> {
    if (p.ops.length > this.limits.maxOps) return failure(limitExceeded("maxOps", this.limits.maxOps, p.ops.length));
    // The given state is held to the limits of a thread's state, as openRun's is.
    const over = stateOverLimit(p.state ?? {}, this.applyLimits);
    if (over) return failure(limitExceeded(over.limit, over.max, over.actual));
    return success(normalize(p.ops, p.state ?? {}, this.applyLimits));
  }

  diffState(p: P.DiffStateParams): Outcome<P.ChangeResult> {
    const path = this.path(p.path);
    if (!path.ok) return path;
    const found = this.thread(p.threadId, p.ifVersion);
    if (!found.ok) return found;
    const thread = found.value;
    const at = valueAt(thread.doc.root, path.value);
    let ops: Op[];
    if (at.ok) ops = diffValue(at.value, p.value, path.value);
    // A missing member or the element just past the end: set it with one add.
    else if ((at.error.code === "PATH_NOT_FOUND" || at.error.code === "INDEX_OUT_OF_BOUNDS") && valueAt(thread.doc.root, path.value.slice(0, -1)).ok) ops = [{ op: "add", path: path.value, value: p.value }];
    else return failure(invalidParams("/path", at.error.code, at.error.message));
    return this.commit(thread, ops, "/path");
  }

  getState(p: P.GetStateParams): Outcome<P.GetStateResult> {
    const path = this.path(p.path);
    if (!path.ok) return path;
    const found = this.thread(p.threadId, undefined);
    if (!found.ok) return found;
    const at = valueAt(found.value.doc.root, path.value);
    if (!at.ok) return failure(invalidParams("/path", at.error.code, at.error.message));
    return success({ version: found.value.version, state: cloneJson(at.value) });
  }

  closeThread(p: P.CloseThreadParams): Outcome<P.CloseThreadResult> {
    return success({ closed: this.store.close(p.threadId) });
  }

  escapePointer(p: P.EscapePointerParams): Outcome<P.EscapePointerResult> {
    const path = decodePath(p.path);
    if (!path.ok) return failure(invalidParams("/path", path.error.code, path.error.message));
    return success({ pointer: formatPointer(path.value) });
  }

  parsePointer(p: P.ParsePointerParams): Outcome<P.ParsePointerResult> {
    const path = parsePointer(p.pointer);
    if (!path.ok) return failure(invalidParams("/pointer", "INVALID_POINTER", path.error.message));
    return success({ path: path.value });
  }

  stats(): Outcome<P.StatsResult> {
    return success({
      threads: this.store.size,
      stateBytes: this.store.stateBytes(),
      requests: this.requests,
      uptimeMs: Math.round(this.now() - this.started),
      limits: { ...this.limits },
      version: this.version,
      evicted: this.store.evicted,
    });
  }

  // ------------------------------------------------------------ helpers

  private checkVersion(actual: number, expected: number | undefined): ServiceError | undefined {
    return expected !== undefined && expected !== actual ? versionConflict(expected, actual) : undefined;
  }

  private thread(id: string, ifVersion: number | undefined): Outcome<Thread> {
    const found = this.store.get(id);
    if (!found.ok) return failure(unknownThread(id, found.reason));
    const conflict = this.checkVersion(found.thread.version, ifVersion);
    return conflict ? failure(conflict) : success(found.thread);
  }

  private path(raw: P.PointerOrPath | undefined): Outcome<string[]> {
    if (raw === undefined) return success([]);
    const path = decodePath(raw);
    if (!path.ok) return failure(invalidParams("/path", path.error.code, path.error.message));
    if (path.value.length > this.limits.maxDepth) return failure(limitExceeded("maxDepth", this.limits.maxDepth, path.value.length));
    const checked = valueAt({}, path.value);
    if (!checked.ok && checked.error.code === "FORBIDDEN_KEY") return failure(invalidParams("/path", "FORBIDDEN_KEY", checked.error.message));
    return path;
  }

  /** Applies generated ops all or nothing; bumps the version when something moved. */
  private commit(thread: Thread, ops: Op[], field: string, adopt = false): Outcome<P.ChangeResult> {
    const out = applyAtomic(thread.doc, ops.map((value) => ({ ok: true as const, value })), { limits: this.applyLimits, normalize: false, adopt });
    if (!out.ok) return failure(callError(out.error, field));
    if (ops.length) thread.version++;
    const delta = ops.map(toWireOp);
    return success({ version: thread.version, delta, events: deltaEvents(delta) });
  }
}
