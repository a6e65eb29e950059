/**
 * Why an op did not apply (protocol/README.md §4). A closed set: callers switch on it,
 * and it is what goes on the wire in `skipped[].code`.
 */
export const SKIP_CODES = [
  "INVALID_OP",
  "INVALID_POINTER",
  "INVALID_INDEX",
  "PATH_NOT_FOUND",
  "FROM_NOT_FOUND",
  "INDEX_OUT_OF_BOUNDS",
  "TEST_FAILED",
  "MOVE_INTO_ITSELF",
  "FORBIDDEN_KEY",
  "LIMIT_EXCEEDED",
  "ROOT_NOT_OBJECT",
] as const;
export type SkipCode = (typeof SKIP_CODES)[number];

/** The limits the core checks, named as on the wire (protocol/README.md §7). */
export type StateLimitName = "maxDepth" | "maxStateBytes";

/**
 * A limit that was passed. `actual` is the figure reached when counting
 * stopped, so for a value far over the limit it is a lower bound.
 */
export interface LimitHit {
  limit: StateLimitName;
  max: number;
  actual: number;
}

/** Why an op did not apply. `C` narrows the codes a given check can report. */
export interface OpError<C extends SkipCode = SkipCode> {
  code: C;
  message: string;
  /** Set when code is LIMIT_EXCEEDED. */
  limit?: LimitHit;
}

/** An op that did not apply in an all-or-nothing patch, with its position in the request. */
export interface FailedOp extends OpError {
  index: number;
}

/**
 * An op that was left out, with its position in the request. `R` is the type
 * of the ops as given: JSON values over the wire, anything for a caller in the same program.
 */
export interface Skip<R = unknown> {
  index: number;
  /** The op as it was given; left out for LIMIT_EXCEEDED, whose value may be what was too large. */
  op?: R;
  code: SkipCode;
  message: string;
}

export const opError = <C extends SkipCode>(code: C, message: string): OpError<C> => ({ code, message });

export const limitError = (limit: StateLimitName, max: number, actual: number, what: string): OpError<"LIMIT_EXCEEDED"> => ({
  code: "LIMIT_EXCEEDED",
  message: `${what} (${limit} ${max}, got ${actual})`,
  limit: { limit, max, actual },
});
