import { err, ok } from "../../core/index.js";
import { discoverDocument } from "../../protocol/discover.js";
import type { CallResult } from "../../protocol/errors.js";
import type { MethodName, Methods } from "../../protocol/types.js";
import * as isParams from "../../protocol/validators.generated.js";
import type { ParamsGuard } from "../../protocol/validators.generated.js";
import type { StateService } from "../../service/state-service.js";
import type { StreamService } from "../../service/stream-service.js";
import { paramsError } from "./validate.js";

/** What a method runs against: the service, and what the transport has counted. */
export interface CallContext {
  readonly service: StateService;
  /** The stream methods' service (protocol/README.md §14). */
  readonly streams: StreamService;
  /** Requests with an id received so far, this one included (protocol/README.md §6, stats). */
  requests(): number;
  /** The connection, on a shared sidecar (§2): the streams and reads it opens are closed when it ends. */
  readonly owner: object | undefined;
}

/** A method with its params type erased: what the dispatcher looks up by name. */
export interface Method {
  readonly name: MethodName;
  /**
   * Checks the params against the method's schema (protocol/README.md §6,
   * the order of checks, step 5) and, when they fit, runs the method on them.
   * A method that waits (readRejoin) or asks a store elsewhere (rejoinStream,
   * on Redis) returns a promise; every other returns its result at once, and
   * the dispatcher's path for those stays as it was.
   */
  call(context: CallContext, params: unknown): Outcome<object>;
}

/** A call's result, now or later. */
export type Outcome<T> = CallResult<T> | Promise<CallResult<T>>;

/**
 * Registers a method once: its name, its compiled validator (a type guard of
 * its params) and its handler, which receives the params narrowed by that
 * guard. The name ties the three to the document's types: a handler that takes
 * or returns something else for that method does not compile.
 */
export function defineMethod<M extends MethodName>(
  name: M,
  isParams: ParamsGuard<Methods[M]["params"]>,
  handler: (context: CallContext, params: Methods[M]["params"]) => Outcome<Methods[M]["result"]>,
): Method {
  return { name, call: (context, params) => (isParams(params) ? handler(context, params) : err(paramsError(isParams.errors))) };
}

/** Every method of protocol/README.md §6 (§14 for the streams), by name. */
export const METHODS: ReadonlyMap<string, Method> = new Map(
  [
    defineMethod("openRun", isParams.openRun, (c, p) => c.service.openRun(p)),
    defineMethod("diffToolState", isParams.diffToolState, (c, p) => c.service.diffToolState(p)),
    defineMethod("applyOps", isParams.applyOps, (c, p) => c.service.applyOps(p)),
    defineMethod("normalize", isParams.normalize, (c, p) => c.service.normalize(p)),
    defineMethod("diffState", isParams.diffState, (c, p) => c.service.diffState(p)),
    defineMethod("getState", isParams.getState, (c, p) => c.service.getState(p)),
    defineMethod("activitySnapshot", isParams.activitySnapshot, (c, p) => c.service.activitySnapshot(p)),
    defineMethod("applyActivityOps", isParams.applyActivityOps, (c, p) => c.service.applyActivityOps(p)),
    defineMethod("diffActivity", isParams.diffActivity, (c, p) => c.service.diffActivity(p)),
    defineMethod("getActivity", isParams.getActivity, (c, p) => c.service.getActivity(p)),
    defineMethod("closeThread", isParams.closeThread, (c, p) => c.service.closeThread(p)),
    defineMethod("escapePointer", isParams.escapePointer, (c, p) => c.service.escapePointer(p)),
    defineMethod("parsePointer", isParams.parsePointer, (c, p) => c.service.parsePointer(p)),
    defineMethod("openStream", isParams.openStream, (c, p) => c.streams.openStream(p, c.owner)),
    defineMethod("fixStream", isParams.fixStream, (c, p) => c.streams.fixStream(p)),
    defineMethod("closeStream", isParams.closeStream, (c, p) => c.streams.closeStream(p)),
    defineMethod("detachStream", isParams.detachStream, (c, p) => c.streams.detachStream(p)),
    defineMethod("classifyRequest", isParams.classifyRequest, (c, p) => c.streams.classifyRequest(p)),
    defineMethod("rejoinStream", isParams.rejoinStream, (c, p) => c.streams.rejoins.rejoinStream(p, c.owner)),
    defineMethod("readRejoin", isParams.readRejoin, (c, p) => c.streams.rejoins.readRejoin(p)),
    defineMethod("closeRejoin", isParams.closeRejoin, (c, p) => c.streams.rejoins.closeRejoin(p)),
    defineMethod("stats", isParams.stats, (c) => c.service.stats(c.requests(), c.streams.stats())),
    defineMethod("rpc.discover", isParams.rpc_discover, () => ok(discoverDocument())),
  ].map((m) => [m.name, m]),
);
