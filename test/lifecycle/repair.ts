import type { JsonObject } from "../../src/core/index.js";
import { PASSTHROUGH } from "../../src/stream/client.js";
import { StreamFixer } from "../../src/stream/fixer.js";
import { fromSse, toSse, type GeneratedRun } from "../../scripts/harness/lifecycle-runs.js";

/**
 * A generated run through `fix` in this process (StreamFixer, the code the
 * binary runs), from the request's state and ids, with the lifecycle repaired
 * or passed (the policy's `lifecycle`, the lifecycle table's checks). The stream's
 * end is fixer.end(), where a cut run is ended.
 */
export function fixText(r: GeneratedRun, lifecycle: "repair" | "pass"): string {
  const fixer = new StreamFixer({ state: structuredClone(r.input.state), policy: { ...PASSTHROUGH, lifecycle }, run: { threadId: r.input.threadId, runId: r.input.runId } });
  return fixer.push(toSse(r.events)) + fixer.end();
}

export const fixEvents = (r: GeneratedRun, lifecycle: "repair" | "pass"): JsonObject[] => fromSse(fixText(r, lifecycle));
