import type { ErrorObject } from "ajv";
import { escapeSegment } from "../core/index.js";
import document from "../../protocol/openrpc.json" with { type: "json" };
import { byMethod } from "./validators.generated.js";

interface MethodDoc {
  name: string;
  params: { name: string; required?: boolean; schema: unknown }[];
}

export interface ParamsProblem {
  field: string;
  reason: "MISSING" | "UNKNOWN_PARAM" | "INVALID_VALUE";
  message: string;
}

/** The OpenRPC document: the single source of truth for params and results. */
export const openrpc = document as unknown as { methods: MethodDoc[]; components: { schemas: Record<string, unknown> } };

/**
 * Compiled params validators, one per method, generated from the document at
 * build time (scripts/gen-validators.mjs): no schema compiler runs in the
 * sidecar, so its first response is not held up compiling one. A test
 * regenerates them and fails if they have drifted from the document.
 */
export class ParamsValidator {
  private readonly methods = new Set(openrpc.methods.map((m) => m.name));

  has(method: string): boolean {
    return this.methods.has(method);
  }

  check(method: string, params: unknown): ParamsProblem | undefined {
    const validate = byMethod[method];
    if (!validate) throw new Error(`no compiled validator for ${method}`);
    if (validate(params)) return undefined;
    return describe((validate.errors ?? [])[0]);
  }
}

function describe(e: ErrorObject | undefined): ParamsProblem {
  if (!e) return { field: "", reason: "INVALID_VALUE", message: "invalid params" };
  if (e.keyword === "required") {
    const name = String((e.params as { missingProperty: string }).missingProperty);
    return { field: `/${escapeSegment(name)}`, reason: "MISSING", message: `missing required param ${JSON.stringify(name)}` };
  }
  if (e.keyword === "additionalProperties") {
    const name = String((e.params as { additionalProperty: string }).additionalProperty);
    return { field: `/${escapeSegment(name)}`, reason: "UNKNOWN_PARAM", message: `unknown param ${JSON.stringify(name)}` };
  }
  return { field: e.instancePath, reason: "INVALID_VALUE", message: `${e.instancePath || "params"} ${e.message ?? "is invalid"}` };
}
