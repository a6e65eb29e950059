/** The pure RFC 6901/6902 core: no I/O, no transport, no logger. */
export * from "./apply.js";
export * from "./decode.js";
export * from "./diff.js";
export * from "./equal.js";
export * from "./errors.js";
export * from "./float.js";
export * from "./json.js";
export { forbidden, valueAt, type LookupCode } from "./locate.js";
export * from "./measure.js";
export * from "./normalize.js";
export * from "./ops.js";
export * from "./patch.js";
export * from "./pointer.js";
export * from "./result.js";
