/**
 * Each method's params, the required one first, as the fuzzer needs them to
 * make a call wrong (a bad type, a missing member). Written out by hand from
 * protocol/openrpc.json, leaving out the params any JSON value satisfies
 * (diffState's value, normalize's state) and openRun's state. Once a table
 * derived from that file is exported (the generated protocol types), this
 * module becomes a one-line re-export of it, filtered to the params that have
 * a wrong value in test/fuzz/vocabulary.ts WRONG.
 */
export const PARAMS: Readonly<Record<string, readonly string[]>> = {
  openRun: ["threadId", "runId", "namespace", "toolState", "snapshot", "ifVersion"],
  diffToolState: ["threadId", "toolState", "set", "remove", "ifVersion"],
  applyOps: ["threadId", "ops", "atomic", "ifVersion"],
  normalize: ["ops"],
  diffState: ["threadId", "path", "ifVersion"],
  getState: ["threadId", "path"],
  closeThread: ["threadId"],
  escapePointer: ["path"],
  parsePointer: ["pointer"],
};
