import type { ErrorObject } from "ajv";
import { escapeSegment } from "../../core/index.js";
import { invalidParams, type CallError } from "../../protocol/errors.js";

/**
 * protocol/README.md §8: a params schema failure maps the validator's first
 * error. A missing required member gives MISSING at `/<member>`; a member not
 * defined gives UNKNOWN_PARAM at `/<member>`; anything else gives
 * INVALID_VALUE at the failing value. The validators themselves are compiled
 * at build time (scripts/gen-protocol.mjs): no schema compiler runs in the
 * sidecar, so its first response is not held up compiling one.
 */
export function paramsError(errors: readonly ErrorObject[] | null | undefined): CallError {
  const e = errors?.[0];
  if (!e) return invalidParams("", "INVALID_VALUE", "invalid params: invalid params");
  if (e.keyword === "required") {
    const name = String(e.params["missingProperty"]);
    return invalidParams(`/${escapeSegment(name)}`, "MISSING", `invalid params: missing required param ${JSON.stringify(name)}`);
  }
  if (e.keyword === "additionalProperties") {
    const name = String(e.params["additionalProperty"]);
    return invalidParams(`/${escapeSegment(name)}`, "UNKNOWN_PARAM", `invalid params: unknown param ${JSON.stringify(name)}`);
  }
  return invalidParams(e.instancePath, "INVALID_VALUE", `invalid params: ${e.instancePath || "params"} ${e.message ?? "is invalid"}`);
}
