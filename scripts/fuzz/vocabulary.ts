import fc from "fast-check";
import type { Json } from "../../src/core/index.js";
import { json, key } from "../harness/arbitraries.js";

/** What the fuzzer says: thread ids, keys, method weights, wrong values, bad numbers and bytes. */

export const THREADS = ["t0", "t/1", "t~0~1", "constructor", "__proto__", "toString", "-", "0", "\u{1F642}".repeat(256), "\ud800x", "never-opened"];
/** Keys beyond ASCII: astral, lone surrogates, combining marks, BOM, line separator, NUL. */
export const WIDE_KEY = fc.oneof(fc.string({ unit: "binary", maxLength: 3 }), fc.constantFrom("\ud800", "\udfff", "a\ud83d", "\uFEFF", "\u2028", "\u00e9", "e\u0301", "\u0000", "\uFFFF", "\u{1F642}", "\uFF0F"));
export const wideObject = fc.dictionary(fc.oneof(key, WIDE_KEY), json, { maxKeys: 5 });
export const SENTINELS = ["s0", "s/~1", "hasOwnProperty"];
export const SCRATCH = ["scratch", "scratch/~"];
export const NAMESPACES = ["toolState", "ns/x", "~", "constructor", "-", "0", "__proto__"];
export const UNKNOWN = ["foo", "", "openrun", "rpc.x", "__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "applyOps "];
export const BAD_POINTERS = ["a", "/~2", "/~", "~1", "/a~", "#/a", " /a"];
export const THREAD_METHODS = new Set(["openRun", "applyOps", "diffState", "diffToolState", "getState", "closeThread"]);
export const METHODS: [number, string][] = [[14, "openRun"], [24, "applyOps"], [10, "diffState"], [12, "diffToolState"], [10, "getState"], [2, "closeThread"], [8, "normalize"], [5, "escapePointer"], [5, "parsePointer"], [2, "stats"], [1, "rpc.discover"], [3, "?"]];
/** Wrong values for each param of scripts/harness/protocol-params.ts PARAMS. */
export const WRONG: Record<string, unknown[]> = { threadId: [5, null, "", "x".repeat(257), [], {}, true], runId: [5, null, []], namespace: [5, null, "", {}], toolState: [[], "x", 5, null], set: [[], "x", 5], remove: ["x", {}, [1], [null]], ops: ["x", 5, {}, null], atomic: ["yes", 1, null], snapshot: ["yes", 0, null], ifVersion: [-1, 1.5, "1", null, 9007199254740992], path: [5, null, true, {}, [-1], [1.5], [null], [{}]], pointer: [5, null, [], {}], messageId: [5, null, "", "x".repeat(257), {}], activityType: [5, null, "", "x".repeat(257), []], replace: ["no", 0, null] };
export const BIG = ["12345678901234567890", "-98765432109876543210", "9007199254740993"];
export const NUMBERS = ["1.0", "1E2", "1e-2", "-0", "-0.0", "1.5e+300", "123456789012345678.0", "12345678901234567890e0", "1e-400", "0.1e1", "5e-324", "9007199254740991", "-9007199254740991"];
export const BAD_UTF8 = [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80]];
export const NOT_JSON = ["{", "}", "]]", '{"jsonrpc":"2.0",}', "NaN", "Infinity", "undefined", "{'id':1}", "// x", '{"a":1}{"b":2}', '"open', "[1,]", "tru", "01", "+1", ".5", "\u0000"];
export const deep = (n: number): string => "[".repeat(n) + "]".repeat(n);
export const isObj = (v: unknown): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v);
export type Broken = { header: string; window: number; certain?: boolean };
