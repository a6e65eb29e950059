import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { escapeSegment } from "../core/index.js";
import document from "../../protocol/openrpc.json" with { type: "json" };

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

const DOC_ID = "openrpc";

/** Points the document's local refs at the registered document. */
function rebase(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rebase);
  if (typeof schema !== "object" || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) out[k] = k === "$ref" && typeof v === "string" && v.startsWith("#/") ? DOC_ID + v : rebase(v);
  return out;
}

/** The closed params object of a method, as one JSON Schema. */
export function paramsSchema(method: MethodDoc): Record<string, unknown> {
  return {
    type: "object",
    properties: Object.fromEntries(method.params.map((p) => [p.name, rebase(p.schema)])),
    required: method.params.filter((p) => p.required).map((p) => p.name),
    additionalProperties: false,
  };
}

/**
 * Compiled params validators, one per method, built on first use: compiling
 * all of them at start-up would cost every process its first milliseconds.
 * `validateSchema: false` skips compiling Ajv's meta-schema; the document is
 * checked against its schemas by the protocol tests instead.
 */
export class ParamsValidator {
  private readonly ajv = new Ajv({ strict: false, validateSchema: false, allErrors: false });
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly methods = new Map(openrpc.methods.map((m) => [m.name, m]));

  constructor() {
    this.ajv.addSchema({ $id: DOC_ID, components: openrpc.components }, DOC_ID);
  }

  has(method: string): boolean {
    return this.methods.has(method);
  }

  check(method: string, params: unknown): ParamsProblem | undefined {
    let validate = this.compiled.get(method);
    if (!validate) {
      const doc = this.methods.get(method);
      if (!doc) throw new Error(`no such method in the protocol document: ${method}`);
      validate = this.ajv.compile(paramsSchema(doc));
      this.compiled.set(method, validate);
    }
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
