import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../helpers/fixtures.js";
import type * as P from "../../src/protocol/types.js";
import { METHODS } from "../../src/rpc/methods.js";
import { openrpc } from "../../src/rpc/validate.js";
import { SKIP_CODES } from "../../src/core/index.js";
import { DEFAULT_LIMITS } from "../../src/service/state-service.js";
import { ErrorCode } from "../../src/service/errors.js";

/**
 * The TypeScript types are written by hand; this file holds them to
 * protocol/openrpc.json. The `satisfies` clauses fail to compile when a type
 * gains or loses a member; the tests fail when the document does.
 */
type Keys<T> = Extract<keyof T, string>;
type RequiredKeys<T> = { [K in Keys<T>]-?: object extends Pick<T, K> ? never : K }[Keys<T>];

interface ParamTypes {
  openRun: P.OpenRunParams;
  diffToolState: P.DiffToolStateParams;
  applyOps: P.ApplyOpsParams;
  normalize: P.NormalizeParams;
  diffState: P.DiffStateParams;
  getState: P.GetStateParams;
  closeThread: P.CloseThreadParams;
  escapePointer: P.EscapePointerParams;
  parsePointer: P.ParsePointerParams;
  stats: P.StatsParams;
}

/** Every param of every method, required ones first; checked both ways at compile time. */
const PARAMS = {
  openRun: { required: ["threadId"], optional: ["runId", "state", "namespace", "toolState", "snapshot", "ifVersion"] },
  diffToolState: { required: ["threadId"], optional: ["toolState", "set", "remove", "ifVersion"] },
  applyOps: { required: ["threadId", "ops"], optional: ["atomic", "ifVersion"] },
  normalize: { required: ["ops"], optional: ["state"] },
  diffState: { required: ["threadId", "value"], optional: ["path", "ifVersion"] },
  getState: { required: ["threadId"], optional: ["path"] },
  closeThread: { required: ["threadId"], optional: [] },
  escapePointer: { required: ["path"], optional: [] },
  parsePointer: { required: ["pointer"], optional: [] },
  stats: { required: [], optional: [] },
} as const satisfies { [M in keyof ParamTypes]: { required: readonly RequiredKeys<ParamTypes[M]>[]; optional: readonly Exclude<Keys<ParamTypes[M]>, RequiredKeys<ParamTypes[M]>>[] } };

// Exhaustiveness: a member of a params type that PARAMS does not list is a compile error here.
type Listed<M extends keyof ParamTypes> = (typeof PARAMS)[M]["required"][number] | (typeof PARAMS)[M]["optional"][number];
const exhaustive: { [M in keyof ParamTypes]: [Exclude<Keys<ParamTypes[M]>, Listed<M>>] extends [never] ? true : false } = {
  openRun: true,
  diffToolState: true,
  applyOps: true,
  normalize: true,
  diffState: true,
  getState: true,
  closeThread: true,
  escapePointer: true,
  parsePointer: true,
  stats: true,
};

interface ResultTypes {
  openRun: P.OpenRunResult;
  diffToolState: P.ChangeResult;
  applyOps: P.ApplyOpsResult;
  normalize: P.NormalizeResult;
  diffState: P.ChangeResult;
  getState: P.GetStateResult;
  closeThread: P.CloseThreadResult;
  escapePointer: P.EscapePointerResult;
  parsePointer: P.ParsePointerResult;
  stats: P.StatsResult;
}
const RESULTS = {
  openRun: ["threadId", "runId", "version", "delta", "events"],
  diffToolState: ["version", "delta", "events"],
  applyOps: ["version", "delta", "skipped", "events"],
  normalize: ["delta", "skipped", "state"],
  diffState: ["version", "delta", "events"],
  getState: ["version", "state"],
  closeThread: ["closed"],
  escapePointer: ["pointer"],
  parsePointer: ["path"],
  stats: ["threads", "stateBytes", "requests", "uptimeMs", "limits", "version", "evicted"],
} as const satisfies { [M in keyof ResultTypes]: readonly Keys<ResultTypes[M]>[] };
const exhaustiveResults: { [M in keyof ResultTypes]: [Exclude<Keys<ResultTypes[M]>, (typeof RESULTS)[M][number]>] extends [never] ? true : false } = {
  openRun: true,
  diffToolState: true,
  applyOps: true,
  normalize: true,
  diffState: true,
  getState: true,
  closeThread: true,
  escapePointer: true,
  parsePointer: true,
  stats: true,
};

interface DocMethod {
  name: string;
  params: { name: string; required?: boolean }[];
  result: { schema: { $ref?: string } };
}
const doc = openrpc as unknown as { methods: DocMethod[]; components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[]; enum?: string[] }> }; "x-limits": Record<string, number>; "x-skip-codes"?: string[]; "x-error-data": Record<string, { code: number }> };
const resultSchema = (m: DocMethod) => doc.components.schemas[(m.result.schema.$ref ?? "").split("/").pop() as string];

describe("protocol/openrpc.json, the code and the types agree", () => {
  it("lists exactly the methods the server dispatches", () => {
    expect(doc.methods.map((m) => m.name).sort()).toEqual(Object.keys(METHODS).sort());
    expect(Object.values(exhaustive).every(Boolean) && Object.values(exhaustiveResults).every(Boolean)).toBe(true);
  });

  for (const [name, spec] of Object.entries(PARAMS)) {
    it(`${name}: params and required flags match the TypeScript type`, () => {
      const m = doc.methods.find((x) => x.name === name) as DocMethod;
      expect(m.params.filter((p) => p.required).map((p) => p.name).sort()).toEqual([...spec.required].sort());
      expect(m.params.filter((p) => !p.required).map((p) => p.name).sort()).toEqual([...spec.optional].sort());
    });
    it(`${name}: result members match the TypeScript type`, () => {
      const m = doc.methods.find((x) => x.name === name) as DocMethod;
      expect(Object.keys(resultSchema(m)?.properties ?? {}).sort()).toEqual([...RESULTS[name as keyof typeof RESULTS]].sort());
    });
  }

  it("has params validators generated from the current document (scripts/gen-validators.mjs --check)", () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, "scripts/gen-validators.mjs"), "--check"], { encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });

  it("has no object member named __proto__, which a bundled JSON import could turn into a prototype", () => {
    const text = readFileSync(path.join(ROOT, "protocol/openrpc.json"), "utf8");
    expect(text).not.toMatch(/"__proto__"\s*:/);
  });

  it("has the skip codes, limits and error codes the code uses", () => {
    expect(doc.components.schemas["SkipCode"]?.enum).toEqual([...SKIP_CODES]);
    expect(doc["x-limits"]).toEqual({ ...DEFAULT_LIMITS });
    const codes = Object.values(doc["x-error-data"]).map((e) => e.code).sort();
    expect(codes).toEqual(Object.values(ErrorCode).sort());
  });
});
