import { StreamFixer, type FixerOptions } from "../../src/stream/fixer.js";
import type { JsonObject } from "../../src/core/index.js";
import { fromSse, toSse, type GeneratedRun } from "./runs.js";

/**
 * A generated run through `fix` in this process (StreamFixer, the code the
 * binary runs), from the request's state, with the lifecycle repaired or
 * passed (spec-40: `lifecycle: "repair" | "pass"`). The stream's end is
 * fixer.end(), where an open run is closed.
 */
export function fixText(r: GeneratedRun, lifecycle: "repair" | "pass"): string {
  // TODO(i40): the option's exact name, once the core lands.
  const fixer = new StreamFixer({ state: structuredClone(r.input.state), lifecycle } as FixerOptions);
  return fixer.push(toSse(r.events)) + fixer.end();
}

export const fixEvents = (r: GeneratedRun, lifecycle: "repair" | "pass"): JsonObject[] => fromSse(fixText(r, lifecycle));
