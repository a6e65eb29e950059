import jsonpatch from "fast-json-patch";
import type { JsonObject } from "../../src/core/index.js";

/** The state a client holds after an SSE stream (LF-framed): snapshots replace it, deltas apply strictly. */
export function replayState(state: JsonObject, stream: string): JsonObject {
  let doc = structuredClone(state);
  for (const block of stream.split("\n\n")) {
    const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
    if (data === "") continue;
    const event = JSON.parse(data) as { type: string; snapshot?: JsonObject; delta?: jsonpatch.Operation[] };
    if (event.type === "STATE_SNAPSHOT" && event.snapshot) doc = event.snapshot;
    if (event.type === "STATE_DELTA" && event.delta) doc = jsonpatch.applyPatch(doc, event.delta, true, false).newDocument;
  }
  return doc;
}
