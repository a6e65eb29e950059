import { applyLenient, newDoc, type ApplyLimits, type Decoded } from "./apply.js";
import { decodeOp } from "./decode.js";
import type { LimitHit, Skip } from "./errors.js";
import type { Json } from "./json.js";
import { cloneJson, measure } from "./measure.js";
import { toWireOp, type WireOp } from "./ops.js";

export interface NormalizeResult {
  /** The ops that apply, in order, normalized and escaped; `test` ops left out. */
  delta: WireOp[];
  skipped: Skip[];
  /** The state after the delta. */
  state: Json;
}

/** Checks a whole state against the limits of a thread's state, walking no further than they allow. */
export function stateOverLimit(state: Json, limits: ApplyLimits): LimitHit | undefined {
  const m = measure(state, limits.maxDepth, limits.maxStateBytes);
  if (m.depth > limits.maxDepth) return { limit: "maxDepth", max: limits.maxDepth, actual: m.depth };
  if (m.bytes > limits.maxStateBytes) return { limit: "maxStateBytes", max: limits.maxStateBytes, actual: m.bytes };
  return undefined;
}

export const decodeOps = (raw: readonly unknown[]): Decoded[] => raw.map(decodeOp);

/**
 * protocol/README.md §6 normalize: the rules of §5 applied to a copy of `state`, as a
 * lenient applyOps would. Pure: the caller's state is not touched.
 */
export function normalize(raw: readonly unknown[], state: Json = {}, limits?: ApplyLimits): NormalizeResult {
  const doc = newDoc(cloneJson(state));
  const { applied, skipped } = applyLenient(doc, decodeOps(raw), raw, limits ? { limits } : {});
  return { delta: applied.map(toWireOp), skipped, state: doc.root };
}
