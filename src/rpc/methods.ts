import type * as P from "../protocol/types.js";
import { success, type Outcome } from "../service/errors.js";
import type { StateService } from "../service/state-service.js";
import { openrpc } from "./validate.js";

/**
 * The method table: each JSON-RPC method name bound to the service. Params
 * have been validated against the protocol document before a handler runs,
 * so the casts only name what the schema already checked.
 */
type Handler = (service: StateService, params: Record<string, unknown>) => Outcome<unknown>;

export const METHODS: Readonly<Record<string, Handler>> = {
  openRun: (s, p) => s.openRun(p as unknown as P.OpenRunParams),
  diffToolState: (s, p) => s.diffToolState(p as unknown as P.DiffToolStateParams),
  applyOps: (s, p) => s.applyOps(p as unknown as P.ApplyOpsParams),
  normalize: (s, p) => s.normalize(p as unknown as P.NormalizeParams),
  diffState: (s, p) => s.diffState(p as unknown as P.DiffStateParams),
  getState: (s, p) => s.getState(p as unknown as P.GetStateParams),
  closeThread: (s, p) => s.closeThread(p as unknown as P.CloseThreadParams),
  escapePointer: (s, p) => s.escapePointer(p as unknown as P.EscapePointerParams),
  parsePointer: (s, p) => s.parsePointer(p as unknown as P.ParsePointerParams),
  stats: (s) => s.stats(),
  "rpc.discover": () => success(openrpc),
};
