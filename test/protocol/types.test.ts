import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { ErrorCodes as JsonRpcErrorCodes } from "vscode-jsonrpc";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { SKIP_CODES, type Json, type Skip as CoreSkip, type SkipCode as CoreSkipCode, type StateLimitName, type WireOp } from "../../src/core/index.js";
import { APPLICATION_ERROR_CODES } from "../../src/protocol/errors.js";
import { DEFAULT_LIMITS } from "../../src/protocol/limits.js";
import { METHOD_PARAMS, type Limits, type LimitExceededData, type MethodName, type Methods, type OutOp, type Skip, type SkipCode, type UnknownThreadData } from "../../src/protocol/types.js";
import { METHODS } from "../../src/rpc/common/methods.js";
import { ErrorCodes } from "../../src/rpc/common/wire.js";
import type { UnknownThreadReason } from "../../src/store/thread-store.js";

/**
 * The protocol is written once, in protocol/openrpc.json; the TypeScript
 * types, the params validators and the document rpc.discover returns are
 * generated from it (scripts/gen-protocol.mjs). This file fails when a
 * generated file has drifted from the document, when a type the core defines
 * for itself no longer matches the document's, and when a constant of the
 * code differs from the document's.
 */

/** true when A and B are each assignable to the other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Keys<T> = Extract<keyof T, string>;
type RequiredKeys<T> = { [K in Keys<T>]-?: object extends Pick<T, K> ? never : K }[Keys<T>];

/**
 * Compiles only while T is true. These checks are made by tsc (`npm run
 * typecheck`, part of `npm test`), not at run time: a false one fails the
 * build with "Type 'false' does not satisfy the constraint 'true'". They are
 * exported only so that no-unused-vars lets them stand.
 */
type Assert<T extends true> = T;

/** The core's own types and the generated ones agree. */
export type CoreTypesAgree = [
  Assert<Same<WireOp, OutOp>>,
  Assert<Same<CoreSkip<Json>, Skip>>,
  Assert<Same<CoreSkipCode, SkipCode>>,
  Assert<Same<StateLimitName, Extract<LimitExceededData["limit"], StateLimitName>>>,
  Assert<Same<keyof Limits, keyof typeof DEFAULT_LIMITS>>,
  Assert<Same<UnknownThreadReason, UnknownThreadData["reason"]>>,
];

/** METHOD_PARAMS lists, for each method, exactly the members of its params type, required ones as required. */
type Listed<M extends MethodName> = (typeof METHOD_PARAMS)[M]["required"][number] | (typeof METHOD_PARAMS)[M]["optional"][number];
type ParamsAgree = { [M in MethodName]: [Same<Listed<M>, Keys<Methods[M]["params"]>>, Same<(typeof METHOD_PARAMS)[M]["required"][number], RequiredKeys<Methods[M]["params"]>>] };
/** true only when every method's two checks are (one false makes the union boolean). */
export type ParamsAgreeForEveryMethod = Assert<ParamsAgree[MethodName][number]>;

interface DocMethod {
  name: string;
  params: { name: string; required?: boolean }[];
  examples?: unknown[];
}
interface Doc {
  methods: DocMethod[];
  components: { schemas: Record<string, { enum?: string[] }>; errors: Record<string, { code: number }> };
  "x-limits": Record<string, number>;
  "x-skip-codes": string[];
  "x-error-data": Record<string, { code: number }>;
}
const text = readFileSync(path.join(ROOT, "protocol/openrpc.json"), "utf8");
const doc = JSON.parse(text) as Doc;

describe("protocol/openrpc.json, the generated code and the code agree", () => {
  it("has types, validators and the rpc.discover document generated from the current document (scripts/gen-protocol.mjs --check)", () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, "scripts/gen-protocol.mjs"), "--check"], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("lists exactly the methods the server dispatches", () => {
    expect(doc.methods.map((m) => m.name).sort()).toEqual([...METHODS.keys()].sort());
    expect(Object.keys(METHOD_PARAMS).sort()).toEqual([...METHODS.keys()].sort());
  });

  for (const m of doc.methods) {
    it(`${m.name}: params and required flags match the generated list`, () => {
      const spec = METHOD_PARAMS[m.name as MethodName];
      expect(m.params.filter((p) => p.required).map((p) => p.name)).toEqual([...spec.required]);
      expect(m.params.filter((p) => !p.required).map((p) => p.name)).toEqual([...spec.optional]);
    });
  }

  it("carries no examples: they live in protocol/examples/ only", () => {
    expect(doc.methods.filter((m) => m.examples !== undefined).map((m) => m.name)).toEqual([]);
  });

  it("has no object member named __proto__, which a bundled JSON import could turn into a prototype", () => {
    expect(text).not.toMatch(/"__proto__"\s*:/);
  });

  it("has the skip codes, limits and error codes the code uses", () => {
    expect(doc.components.schemas["SkipCode"]?.enum).toEqual([...SKIP_CODES]);
    expect(doc["x-skip-codes"]).toEqual([...SKIP_CODES]);
    expect(doc["x-limits"]).toEqual({ ...DEFAULT_LIMITS });
    const codes = { ...ErrorCodes, ...APPLICATION_ERROR_CODES };
    const byName = (errors: Record<string, { code: number }>) => Object.fromEntries(Object.entries(errors).map(([name, e]) => [name, e.code]));
    expect(byName(doc["x-error-data"])).toEqual(codes);
    expect(byName(doc.components.errors)).toEqual(codes);
  });

  it("gives the standard errors vscode-jsonrpc's codes", () => {
    expect(ErrorCodes).toEqual({
      ParseError: JsonRpcErrorCodes.ParseError,
      InvalidRequest: JsonRpcErrorCodes.InvalidRequest,
      MethodNotFound: JsonRpcErrorCodes.MethodNotFound,
      InvalidParams: JsonRpcErrorCodes.InvalidParams,
      InternalError: JsonRpcErrorCodes.InternalError,
    });
  });
});
