/**
 * A value or an error, never a throw: the one result type of core, store,
 * service and rpc. A failure is data the caller must look at, so a lenient
 * call can skip an op and go on (protocol/README.md §4) and a refused call
 * can be answered with the error it met (§8).
 */
export type Result<T, E> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const err = <E>(error: E): { ok: false; error: E } => ({ ok: false, error });
