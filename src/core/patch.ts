import { NO_LIMITS, mark, newDoc, rollback, type Doc, type Undo } from "./apply.js";
import { decodeOps, type Decoded } from "./decode.js";
import type { FailedOp, Skip } from "./errors.js";
import { cloneJson, type Json } from "./json.js";
import type { StateLimits } from "./measure.js";
import { applyNormalized, type ApplyOptions, type Rules } from "./normalize.js";
import { toWireOp, type ChangeOp, type WireOp } from "./ops.js";
import { err, ok, type Result } from "./result.js";

/** Whole patches: lenient (protocol/README.md §5 rule 4) or all or nothing (RFC 6902 §5). */

/** What a lenient patch did. `R` is the type of the ops as given (see Skip). */
export interface Patched<R = unknown> {
  /** What was applied, in order, inserted ops included; `test` ops and ops that changed nothing (§5 rule 8) left out. */
  applied: ChangeOp[];
  skipped: Skip<R>[];
}

/**
 * protocol/README.md §5 rule 8: in a whole patch, an op that would leave the
 * document as it is is neither applied nor sent nor skipped. Part of
 * normalization, so only when `normalize` is on; `fix` applies its ops one by
 * one through a transaction and keeps such ops, since a delta that needs no
 * mending goes out as it came (§13).
 */
function withDefaults(opts: ApplyOptions): Rules {
  const normalize = opts.normalize ?? true;
  return { limits: opts.limits ?? NO_LIMITS, normalize, adopt: opts.adopt ?? false, skipEqual: normalize };
}

/**
 * protocol/README.md §5 rule 4: each op applies or is skipped and reported; a skipped op
 * leaves the document as it was, and later ops apply to the state as it stands.
 */
export function applyLenient<R>(doc: Doc, ops: readonly Decoded[], raw: readonly R[], options: ApplyOptions = {}): Patched<R> {
  const opts = withDefaults(options);
  const applied: ChangeOp[] = [];
  const skipped: Skip<R>[] = [];
  for (let i = 0; i < ops.length; i++) {
    const d = ops[i] as Decoded;
    const e = d.ok ? applyNormalized(doc, d.value, opts, [], applied) : d.error;
    // A LIMIT_EXCEEDED op is not echoed: its value may be what was too large.
    if (e) skipped.push(e.code === "LIMIT_EXCEEDED" ? { index: i, code: e.code, message: e.message } : { index: i, op: raw[i] as R, code: e.code, message: e.message });
  }
  return { applied, skipped };
}

/**
 * RFC 6902 §5: all ops apply or none. The undo log reverses what was done, so
 * the cost is that of the ops, not a copy of the document. The error names
 * the first op that did not apply.
 */
export function applyAtomic(doc: Doc, ops: readonly Decoded[], options: ApplyOptions = {}): Result<ChangeOp[], FailedOp> {
  const opts = withDefaults(options);
  const applied: ChangeOp[] = [];
  const undo: Undo[] = [];
  const before = mark(doc);
  for (let i = 0; i < ops.length; i++) {
    const d = ops[i] as Decoded;
    const e = d.ok ? applyNormalized(doc, d.value, opts, undo, applied) : d.error;
    if (e) {
      rollback(doc, undo, 0, before);
      return err({ ...e, index: i });
    }
  }
  return ok(applied);
}

export interface NormalizeResult<R = unknown> {
  /** The ops that apply, in order, normalized and escaped; `test` ops left out. */
  delta: WireOp[];
  skipped: Skip<R>[];
  /** The state after the delta. */
  state: Json;
}

/**
 * protocol/README.md §6 normalize: the rules of §5 applied to a copy of `state`, as a
 * lenient applyOps would. Pure: the caller's state is not touched.
 */
export function normalize<R>(raw: readonly R[], state: Json = {}, limits?: StateLimits): NormalizeResult<R> {
  const doc = newDoc(cloneJson(state));
  const { applied, skipped } = applyLenient(doc, decodeOps(raw), raw, limits ? { limits } : {});
  return { delta: applied.map(toWireOp), skipped, state: doc.root };
}
