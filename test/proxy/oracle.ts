import type { JsonObject } from "../../src/core/index.js";
import { StreamFixer, type Policy } from "../../src/stream/fixer.js";

export interface Activity {
  activityType: string;
  content: JsonObject;
}

/** What the proxy's mirror computes for one stream: `fix` run in this process over the upstream's exact slices, with the proxy's policy. */
export function replay(state: JsonObject, slices: readonly Buffer[], policy?: Policy): { state: JsonObject; activities: Map<string, Activity>; text: string } {
  const fixer = new StreamFixer({ state: structuredClone(state), ...(policy ? { policy } : {}) });
  const text = slices.map((s) => fixer.push(s)).join("") + fixer.end();
  return { state: fixer.state, activities: new Map(fixer.activities), text };
}
