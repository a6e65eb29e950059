import { setFlagsFromString } from "node:v8";

/**
 * JSON.parse that keeps integers a double cannot hold from being silently
 * changed (PROTOCOL §3). An integer literal beyond ±(2^53 - 1) such as a
 * Python id 12345678901234567890 is replaced by an UnsafeInteger marker that
 * carries its source text, so the params scan can refuse it and name its
 * path. Floats (with a fraction or an exponent, as Python writes 6.02e23) are
 * doubles on both ends and pass unchanged.
 *
 * The literal is read with the reviver's source-text access (TC39 "JSON.parse
 * source text access"; default in Node 22, behind this V8 flag in Node 20).
 * Only messages with a run of 16 or more digits take that slower path.
 */
setFlagsFromString("--harmony-json-parse-with-source");

export class UnsafeInteger {
  constructor(readonly source: string) {}
}

const LONG_DIGITS = /\d{16}/;
const INTEGER_LITERAL = /^-?\d+$/;

function revive(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== "number") return value;
  const source = context?.source;
  if (source === undefined) {
    // No source text access: refuse what cannot be told apart from a changed integer.
    return Number.isInteger(value) && !Number.isSafeInteger(value) ? new UnsafeInteger(String(value)) : value;
  }
  return INTEGER_LITERAL.test(source) && !Number.isSafeInteger(value) ? new UnsafeInteger(source) : value;
}

/** Parses JSON text; throws SyntaxError like JSON.parse. */
export function parseJson(text: string): unknown {
  return LONG_DIGITS.test(text) ? JSON.parse(text, revive as never) : JSON.parse(text);
}
