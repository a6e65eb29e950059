/**
 * Why an op did not apply (protocol/README.md §4). A closed set: callers switch on it,
 * and it is what goes on the wire in `skipped[].code`.
 */
export type SkipCode =
  | "INVALID_OP"
  | "INVALID_POINTER"
  | "INVALID_INDEX"
  | "PATH_NOT_FOUND"
  | "FROM_NOT_FOUND"
  | "INDEX_OUT_OF_BOUNDS"
  | "TEST_FAILED"
  | "MOVE_INTO_ITSELF"
  | "FORBIDDEN_KEY"
  | "LIMIT_EXCEEDED";

export const SKIP_CODES: readonly SkipCode[] = [
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
];

/** The limit an op or a call ran into, named as on the wire (protocol/README.md §7). */
export type LimitName = "maxMessageBytes" | "maxOps" | "maxDepth" | "maxStateBytes" | "maxThreads";

/**
 * A limit that was passed. `actual` is the figure reached when counting
 * stopped, so for a value far over the limit it is a lower bound.
 */
export interface LimitHit {
  limit: LimitName;
  max: number;
  actual: number;
}

export interface OpError {
  code: SkipCode;
  message: string;
  /** Set when code is LIMIT_EXCEEDED. */
  limit?: LimitHit;
}

/** An op that was left out, with its position in the request. */
export interface Skip {
  index: number;
  /** The op as it was given; left out for LIMIT_EXCEEDED, whose value may be what was too large. */
  op?: unknown;
  code: SkipCode;
  message: string;
}

export const opError = (code: SkipCode, message: string): OpError => ({ code, message });

export const limitError = (limit: LimitName, max: number, actual: number, what: string): OpError => ({
  code: "LIMIT_EXCEEDED",
  message: `${what} (${limit} ${max}, got ${actual})`,
  limit: { limit, max, actual },
});
