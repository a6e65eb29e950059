/**
 * The pure RFC 6901/6902 core: no I/O, no transport, no logger. A document
 * is held and patched through JsonDocument (document.ts); the engine behind
 * it (apply.ts: the Doc record, its undo log, mark and rollback) and the
 * per-op rules it applies (normalize.ts) are not exported, so no caller can
 * change a document's root without its byte count and nesting bound.
 */
export * from "./decode.js";
export * from "./diff.js";
export { JsonDocument, type Writer } from "./document.js";
export * from "./equal.js";
export * from "./errors.js";
export * from "./float.js";
export * from "./json.js";
export { forbidden, valueAt, type LookupCode } from "./locate.js";
export * from "./measure.js";
export { rootDiff, type ApplyOptions } from "./normalize.js";
export * from "./ops.js";
export { normalize, type NormalizeResult, type Patched } from "./patch.js";
export * from "./pointer.js";
export * from "./result.js";
