import fc from "fast-check";
import type { Json, JsonObject } from "../../src/core/index.js";

/**
 * Event streams for the agreement and fix tests: a corpus of the mistakes
 * agents make in the field, and fast-check arbitraries that mix them with
 * well-formed traffic. A stream is a list of event data texts (usually
 * JSON.stringify of an event, sometimes deliberately not JSON at all).
 */

export interface Case {
  name: string;
  state: JsonObject;
  events: string[];
}

const J = (e: unknown): string => JSON.stringify(e);
const start = (runId = "r1") => J({ type: "RUN_STARTED", threadId: "t", runId });
const finish = (runId = "r1") => J({ type: "RUN_FINISHED", threadId: "t", runId });
const delta = (...ops: unknown[]) => J({ type: "STATE_DELTA", delta: ops });
const snapshot = (s: Json) => J({ type: "STATE_SNAPSHOT", snapshot: s });
const actSnap = (messageId: string, content: JsonObject, extra: object = {}) => J({ type: "ACTIVITY_SNAPSHOT", messageId, activityType: "plan", content, ...extra });
const actDelta = (messageId: string, ...patch: unknown[]) => J({ type: "ACTIVITY_DELTA", messageId, activityType: "plan", patch });
const run = (...events: string[]) => [start(), ...events, finish()];

export const CORPUS: Case[] = [
  { name: "a clean run", state: {}, events: run(delta({ op: "add", path: "/todos", value: [] }, { op: "add", path: "/todos/-", value: "milk" }), snapshot({ a: 1 }), delta({ op: "replace", path: "/a", value: 2 })) },
  { name: "replace for a new key", state: { ui: {} }, events: run(delta({ op: "replace", path: "/ui/panel", value: "open" })) },
  { name: "an unescaped / in a key that exists (ag-ui #2242)", state: { toolState: { "raster-ops/dataset": "era5" } }, events: run(delta({ op: "replace", path: "/toolState/raster-ops/dataset", value: "cmip6" })) },
  { name: "an unescaped / in a new key (ag-ui #2242)", state: { toolState: {} }, events: run(delta({ op: "add", path: "/toolState/raster-ops/dataset", value: "era5" })) },
  { name: "an unescaped ~ in a key (ag-ui #2242)", state: {}, events: run(delta({ op: "add", path: "/m~n", value: 1 })) },
  { name: "replace /steps against {} (CopilotKit #4934)", state: {}, events: run(delta({ op: "replace", path: "/steps", value: [{ title: "fetch", done: false }] })) },
  { name: "replace on a missing member in a fresh thread (soliplex #1255)", state: {}, events: run(delta({ op: "replace", path: "/counter", value: 1 }, { op: "replace", path: "/status", value: "ok" })) },
  { name: "append to a missing array", state: {}, events: run(delta({ op: "add", path: "/todos/-", value: "milk" })) },
  { name: "a malformed pointer", state: {}, events: run(delta({ op: "add", path: "todos", value: [] })) },
  { name: "a missing value", state: {}, events: run(delta({ op: "add", path: "/a" })) },
  { name: "an unknown op", state: { a: 1 }, events: run(delta({ op: "increment", path: "/a" }, { op: "replace", path: "/a", value: 2 })) },
  { name: "a test op that fails", state: { a: 1 }, events: run(delta({ op: "test", path: "/a", value: 2 }, { op: "replace", path: "/a", value: 3 })) },
  { name: "ACTIVITY_DELTA before its snapshot", state: {}, events: run(actDelta("a1", { op: "add", path: "/steps/-", value: "x" }), actSnap("a1", { steps: [] }), actDelta("a1", { op: "add", path: "/steps/-", value: "y" })) },
  { name: "an activity patch that fails", state: {}, events: run(actSnap("a1", {}), actDelta("a1", { op: "add", path: "/steps/-", value: "x" })) },
  { name: "replace: false keeps the activity", state: {}, events: run(actSnap("a1", { n: 1 }), actSnap("a1", { m: 1 }, { replace: false }), actDelta("a1", { op: "replace", path: "/m", value: 2 })) },
  { name: "an ACTIVITY_DELTA for a text message", state: {}, events: run(J({ type: "TEXT_MESSAGE_START", messageId: "m1", role: "assistant" }), J({ type: "TEXT_MESSAGE_END", messageId: "m1" }), actDelta("m1", { op: "add", path: "/x", value: 1 })) },
  { name: "a delta before RUN_STARTED", state: {}, events: [delta({ op: "add", path: "/a", value: 1 }), start(), finish()] },
  { name: "an event after RUN_FINISHED", state: {}, events: [start(), finish(), delta({ op: "add", path: "/a", value: 1 })] },
  { name: "an event after RUN_ERROR", state: {}, events: [start(), J({ type: "RUN_ERROR", message: "boom" }), delta({ op: "add", path: "/a", value: 1 })] },
  { name: "two runs keep the state", state: {}, events: [...run(delta({ op: "add", path: "/a", value: 1 })), start("r2"), delta({ op: "replace", path: "/a", value: 2 }), finish("r2")] },
  { name: "RUN_FINISHED with a text message open", state: {}, events: [start(), J({ type: "TEXT_MESSAGE_START", messageId: "m1" }), finish()] },
  { name: "an unknown event type", state: {}, events: run(J({ type: "THINKING_ABOUT_IT" }), delta({ op: "add", path: "/a", value: 1 })) },
  { name: "data that is not JSON", state: {}, events: run("{not json") },
  { name: "an event that is not an object", state: {}, events: run("[1,2]") },
  { name: "a delta whose delta is not an array", state: {}, events: run(J({ type: "STATE_DELTA", delta: { op: "add" } })) },
  { name: "a move through a shifting index", state: { a: [0, [1], 2, [3]] }, events: run(delta({ op: "move", from: "/a/0", path: "/a/2/0" })) },
  // fast-json-patch applies it: the client's state becomes null (protocol/README.md §11 is why fix drops it).
  { name: "a remove of the root, which the client applies", state: { a: 1 }, events: run(delta({ op: "remove", path: "" })) },
  // fast-json-patch moves the root into itself (a cycle), then its check of the next move copies the document through JSON, which throws: the client drops the delta.
  { name: "a move of the root into itself, then a move in the same delta", state: { a: 1 }, events: run(delta({ op: "move", from: "", path: "/-" }, { op: "move", from: "/a", path: "/b" }), delta({ op: "add", path: "/c", value: 1 })) },
];

// ------------------------------------------------------------------ fuzzing

const KEYS = ["a", "b", "todos", "steps", "a/b", "m~n", "-", "0", "__proto__", "constructor", "prototype"];
const key = fc.constantFrom(...KEYS);
const value: fc.Arbitrary<Json> = fc.letrec<{ v: Json }>((tie) => ({
  v: fc.oneof({ depthSize: "small" }, fc.constantFrom<Json>(null, true, 0, 1, "x"), fc.array(tie("v"), { maxLength: 3 }), fc.dictionary(key, tie("v"), { maxKeys: 3 })),
})).v;
const object = fc.dictionary(key, value, { maxKeys: 4 }) as fc.Arbitrary<JsonObject>;

/** Pointers over the key vocabulary, escaped or (on purpose) not, plus array tokens and a few broken ones. */
const token = fc.oneof(key, fc.constantFrom("-", "0", "1", "01", "5"));
const escaped = (t: string) => t.replace(/~/g, "~0").replace(/\//g, "~1");
const pointer = fc.oneof(
  { weight: 6, arbitrary: fc.array(token, { minLength: 1, maxLength: 3 }).map((ts) => "/" + ts.map(escaped).join("/")) },
  { weight: 2, arbitrary: fc.array(token, { minLength: 1, maxLength: 3 }).map((ts) => "/" + ts.join("/")) },
  { weight: 1, arbitrary: fc.constantFrom("", "a", "/~2", "/a~") },
);
const op = fc.oneof(
  { weight: 8, arbitrary: fc.record({ op: fc.constantFrom("add", "replace", "test"), path: pointer, value }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("remove"), path: pointer }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom("move", "copy"), from: pointer, path: pointer }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>({ op: "add", path: "/a" }, { op: "bump", path: "/a" }, { path: "/a", value: 1 }, { op: "copy", path: "/a" }, null, 7) },
);
const patch = fc.array(op, { maxLength: 4 });
const activityId = fc.constantFrom("a1", "a2", "m1");

/** A MESSAGES_SNAPSHOT that names activities, text messages, or both, and may declare which activity types it owns. */
const messagesSnapshot = fc
  .tuple(fc.subarray(["a1", "a2", "m1"]), object, fc.constantFrom(undefined, null, ["plan"], ["other"]))
  .map(([ids, content, owned]) =>
    J({
      type: "MESSAGES_SNAPSHOT",
      messages: ids.map((id) => (id === "m1" ? { id, role: "assistant", content: "hello" } : { id, role: "activity", activityType: "plan", content })),
      ...(owned === undefined ? {} : { metadata: { "@ag-ui/client": { authoritativeActivityTypes: owned } } }),
    }),
  );

/** One event's data text. `clean` leaves out what breaks the run (lifecycle and schema), for the fix guarantee's fixable streams. */
function event(clean: boolean): fc.Arbitrary<string[]> {
  const one = (a: fc.Arbitrary<string>) => a.map((e) => [e]);
  const choices = [
    { weight: 10, arbitrary: one(patch.map((d) => J({ type: "STATE_DELTA", delta: d }))) },
    { weight: 2, arbitrary: one(object.map(snapshot)) },
    { weight: 3, arbitrary: one(fc.tuple(fc.constantFrom("a1", "a2"), object, fc.constantFrom(undefined, true, false)).map(([id, c, r]) => actSnap(id, c, r === undefined ? {} : { replace: r }))) },
    { weight: 5, arbitrary: one(fc.tuple(activityId, patch).map(([id, p]) => actDelta(id, ...p))) },
    { weight: 1, arbitrary: fc.constant<string[]>([J({ type: "TEXT_MESSAGE_START", messageId: "m1", role: "assistant" }), J({ type: "TEXT_MESSAGE_CONTENT", messageId: "m1", delta: "hi" }), J({ type: "TEXT_MESSAGE_END", messageId: "m1" })]) },
    { weight: 1, arbitrary: fc.constant<string[]>([J({ type: "STEP_STARTED", stepName: "s" }), J({ type: "STEP_FINISHED", stepName: "s" })]) },
    { weight: 1, arbitrary: fc.constant<string[]>([J({ type: "CUSTOM", name: "n", value: 1 })]) },
    { weight: 1, arbitrary: one(fc.constantFrom("a2", "t1").map((messageId) => J({ type: "TOOL_CALL_RESULT", messageId, toolCallId: "c1", content: "ok" }))) },
    { weight: 1, arbitrary: one(messagesSnapshot) },
    { weight: 1, arbitrary: one(fc.tuple(activityId, patch).map(([id, p]) => J({ type: "ACTIVITY_DELTA", messageId: id, activityType: "plan2", patch: p }))) },
  ];
  if (!clean) {
    // Subagent tags that disagree with the opener break the lifecycle; an activity named like a text message clashes.
    choices.push(
      { weight: 1, arbitrary: one(fc.tuple(fc.constantFrom("a1", "m1"), object, fc.constantFrom("s1", "s2")).map(([id, c, sub]) => actSnap(id, c, { subagentRunId: sub }))) },
      { weight: 1, arbitrary: one(fc.tuple(activityId, patch, fc.constantFrom("s1", "s2")).map(([id, p, sub]) => J({ type: "ACTIVITY_DELTA", messageId: id, activityType: "plan2", patch: p, subagentRunId: sub }))) },
    );
    choices.push(
      { weight: 1, arbitrary: fc.constantFrom<string[]>([finish()], [start("r2")], [J({ type: "RUN_ERROR", message: "x" })], [J({ type: "TEXT_MESSAGE_END", messageId: "m9" })], [J({ type: "STEP_FINISHED", stepName: "nope" })]) },
      { weight: 1, arbitrary: fc.constantFrom<string[]>([J({ type: "NOT_AN_EVENT" })], ["{oops"], ["null"], [J({ type: "STATE_SNAPSHOT" })], [J({ type: "ACTIVITY_DELTA", messageId: "a1", patch: [] })]) },
    );
  }
  return fc.oneof(...choices);
}

/** A stream: a run (or, unclean, not quite) around fuzzed events, from a fuzzed state. */
export function stream(clean: boolean): fc.Arbitrary<Case> {
  const body = fc.array(event(clean), { maxLength: 14 }).map((es) => es.flat());
  const frame = clean ? fc.constant(true) : fc.boolean();
  return fc.tuple(object, body, frame, fc.boolean()).map(([state, events, framed, twoRuns]) => ({
    name: "fuzzed",
    state,
    events: framed ? [start(), ...events, finish(), ...(twoRuns ? [start("r2"), delta({ op: "add", path: "/z", value: 1 }), finish("r2")] : [])] : events,
  }));
}

/** SSE text of a stream: one LF-framed "data:" block per event (the client's SSE parser reads no other framing). */
export const toSse = (events: readonly string[]): string => events.map((e) => `data: ${e}\n\n`).join("");
export const toNdjson = (events: readonly string[]): string => events.map((e) => `${e}\n`).join("");

/**
 * How a server may end the lines of an SSE event: LF (what @ag-ui/client reads),
 * CRLF (sse-starlette's default), CR alone, or mixed. Each string ends the data line and the block.
 */
export const LINE_ENDS = ["\n\n", "\r\n\r\n", "\r\r", "\n\r\n", "\r\n\n"] as const;

/** SSE text of a stream, each event framed with the line ends given for it (cycled). */
export const toSseWith = (events: readonly string[], ends: readonly string[]): string => events.map((e, i) => `data: ${e}${ends[i % ends.length] ?? "\n\n"}`).join("");

/** Cuts `text` at the given offsets (any order, duplicates allowed): the parts a middleware may hand over. */
export function cut(text: string, at: readonly number[]): string[] {
  const points = [...new Set(at.map((n) => n % (text.length + 1)))].sort((a, b) => a - b);
  const parts: string[] = [];
  let from = 0;
  for (const p of points) {
    parts.push(text.slice(from, p));
    from = p;
  }
  parts.push(text.slice(from));
  return parts;
}
