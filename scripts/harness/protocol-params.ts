import { METHOD_PARAMS } from "../../src/protocol/types.js";
import { WRONG } from "../fuzz/vocabulary.js";

/**
 * Each method's params, required ones first, as the fuzzer needs them to make
 * a call wrong (a bad type, a missing member): the generated METHOD_PARAMS
 * (from protocol/openrpc.json), kept to the params that scripts/fuzz/vocabulary.ts
 * WRONG has wrong values for. Methods left with none are left out.
 */
export const PARAMS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  Object.entries(METHOD_PARAMS)
    .map(([method, p]) => [method, [...p.required, ...p.optional].filter((name) => name in WRONG)] as const)
    .filter(([, names]) => names.length > 0),
);
