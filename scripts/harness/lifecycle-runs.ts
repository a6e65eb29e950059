import fc from "fast-check";
import type { JsonObject } from "../../src/core/index.js";

/**
 * Random AG-UI runs with lifecycle faults injected (issue 40), for the
 * property test and scripts/lifecycle-share.ts. A stream is one or two
 * well-formed runs: text messages, tool calls, steps and state deltas, their
 * events interleaved (text and tool streams overlap, as AG-UI 1.0 allows),
 * every STATE_DELTA one that applies. Then faults the field sends (protocol/README.md
 * §13's mends table) are injected: content after its message's (or call's) end, a
 * missing start (RUN_STARTED, TEXT_MESSAGE_START, TOOL_CALL_START), a missing
 * end (RUN_FINISHED with open messages, calls or steps), events after
 * RUN_FINISHED, and a cut (the stream stops anywhere). No RUN_ERROR is sent:
 * every delta the server sent must reach the client.
 */

export interface GeneratedRun {
  input: { threadId: string; runId: string; state: JsonObject };
  events: JsonObject[];
  /** The faults injected, by kind, for a failure's message. */
  faults: string[];
}

const THREAD = "t";

/** One span: the events of one message, call, step or delta, in their own order. */
type Span = JsonObject[];

const chars = fc.constantFrom("a", "b", " ", "é", "☕", "{", "\"", "\n");
const text = fc.array(chars, { minLength: 1, maxLength: 4 }).map((cs) => cs.join(""));
const deltas = fc.array(text, { minLength: 0, maxLength: 3 });
const value = fc.oneof(fc.integer({ min: 0, max: 9 }), text, fc.constant(null), fc.constant([1, 2]));

type SpanSpec = { kind: "text"; deltas: string[] } | { kind: "tool"; deltas: string[]; name: string } | { kind: "step" } | { kind: "delta"; key: number; value: unknown } | { kind: "snapshot"; value: unknown };

const spanSpec: fc.Arbitrary<SpanSpec> = fc.oneof(
  { weight: 4, arbitrary: deltas.map((d): SpanSpec => ({ kind: "text", deltas: d })) },
  { weight: 3, arbitrary: fc.tuple(deltas, fc.constantFrom("search", "plan")).map(([d, name]): SpanSpec => ({ kind: "tool", deltas: d, name })) },
  { weight: 1, arbitrary: fc.constant<SpanSpec>({ kind: "step" }) },
  { weight: 3, arbitrary: fc.tuple(fc.integer({ min: 0, max: 3 }), value).map(([key, v]): SpanSpec => ({ kind: "delta", key, value: v })) },
  { weight: 1, arbitrary: value.map((v): SpanSpec => ({ kind: "snapshot", value: v })) },
);

/** A span's events; `n` makes its ids unique in the stream. */
function spanEvents(s: SpanSpec, n: string): Span {
  switch (s.kind) {
    case "text":
      return [{ type: "TEXT_MESSAGE_START", messageId: `m${n}`, role: "assistant" }, ...s.deltas.map((delta) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: `m${n}`, delta })), { type: "TEXT_MESSAGE_END", messageId: `m${n}` }];
    case "tool":
      return [{ type: "TOOL_CALL_START", toolCallId: `c${n}`, toolCallName: s.name }, ...s.deltas.map((delta) => ({ type: "TOOL_CALL_ARGS", toolCallId: `c${n}`, delta })), { type: "TOOL_CALL_END", toolCallId: `c${n}` }];
    case "step":
      return [
        { type: "STEP_STARTED", stepName: `s${n}` },
        { type: "STEP_FINISHED", stepName: `s${n}` },
      ];
    case "delta":
      // An add of a member of the root object applies whatever the state holds (a snapshot keeps it an object).
      return [{ type: "STATE_DELTA", delta: [{ op: "add", path: `/k${s.key}`, value: s.value }] } as JsonObject];
    case "snapshot":
      return [{ type: "STATE_SNAPSHOT", snapshot: { k0: s.value } } as JsonObject];
  }
}

/** The spans' events merged in the order `picks` says, each span's own order kept. */
function interleave(spans: Span[], picks: number[]): JsonObject[] {
  const queues = spans.map((s) => [...s]);
  const out: JsonObject[] = [];
  let p = 0;
  for (;;) {
    const open = queues.filter((q) => q.length > 0);
    if (open.length === 0) return out;
    const q = open[(picks[p++ % Math.max(picks.length, 1)] ?? 0) % open.length] as JsonObject[];
    out.push(q.shift() as JsonObject);
  }
}

const oneRun = fc.tuple(fc.array(spanSpec, { maxLength: 6 }), fc.array(fc.nat(), { minLength: 1, maxLength: 8 }));

export type Fault =
  | { kind: "content after end"; at: number; where: number }
  | { kind: "missing start"; at: number }
  | { kind: "missing end"; at: number }
  | { kind: "events after RUN_FINISHED"; at: number; where: number }
  | { kind: "cut"; where: number };

const nat = fc.nat({ max: 1000 });
export const fault: fc.Arbitrary<Fault> = fc.oneof(
  fc.tuple(nat, nat).map(([at, where]): Fault => ({ kind: "content after end", at, where })),
  nat.map((at): Fault => ({ kind: "missing start", at })),
  nat.map((at): Fault => ({ kind: "missing end", at })),
  fc.tuple(nat, nat).map(([at, where]): Fault => ({ kind: "events after RUN_FINISHED", at, where })),
  nat.map((where): Fault => ({ kind: "cut", where })),
);

const indexesOf = (events: readonly JsonObject[], types: readonly string[]): number[] => events.flatMap((e, i) => (types.includes(String(e["type"])) ? [i] : []));

/** Where the run around index i ends: the index of the next RUN_FINISHED or RUN_STARTED after it, or the stream's length. */
function runEnd(events: readonly JsonObject[], i: number): number {
  for (let j = i + 1; j < events.length; j++) if (events[j]?.["type"] === "RUN_FINISHED" || events[j]?.["type"] === "RUN_STARTED") return j;
  return events.length;
}

/** Injects one fault; a fault with nothing to act on (no end to put content after, say) leaves the stream as it is. */
export function inject(events: JsonObject[], f: Fault, n: number): JsonObject[] {
  const out = [...events];
  const pick = (types: readonly string[], at: number): number | undefined => {
    const is = indexesOf(out, types);
    return is.length === 0 ? undefined : is[at % is.length];
  };
  switch (f.kind) {
    case "content after end": {
      // pydantic-ai #3108: a delta for a message (or a call) that has ended, before the run's end.
      const i = pick(["TEXT_MESSAGE_END", "TOOL_CALL_END"], f.at);
      if (i === undefined) return out;
      const e = out[i] as JsonObject;
      const late = e["type"] === "TEXT_MESSAGE_END" ? { type: "TEXT_MESSAGE_CONTENT", messageId: e["messageId"], delta: `late${n}` } : { type: "TOOL_CALL_ARGS", toolCallId: e["toolCallId"], delta: `late${n}` };
      const span = runEnd(out, i) - i;
      out.splice(i + 1 + (f.where % span), 0, late as JsonObject);
      return out;
    }
    case "missing start": {
      const i = pick(["RUN_STARTED", "TEXT_MESSAGE_START", "TOOL_CALL_START"], f.at);
      if (i !== undefined) out.splice(i, 1);
      return out;
    }
    case "missing end": {
      const i = pick(["TEXT_MESSAGE_END", "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"], f.at);
      if (i !== undefined) out.splice(i, 1);
      return out;
    }
    case "events after RUN_FINISHED": {
      // The run's end moved before some of its events: they come after RUN_FINISHED.
      const i = pick(["RUN_FINISHED"], f.at);
      if (i === undefined) return out;
      let s = i - 1;
      while (s > 0 && out[s]?.["type"] !== "RUN_STARTED") s--;
      if (i - s <= 1) return out;
      const [end] = out.splice(i, 1);
      out.splice(s + 1 + (f.where % (i - s - 1)), 0, end as JsonObject);
      return out;
    }
    case "cut":
      // At least one event stays: a server that sent nothing has no run to end.
      return out.slice(0, 1 + (f.where % Math.max(out.length, 1)));
  }
}

/** One or two runs from a state, with up to three faults (none, at times: a clean stream must stay clean). */
export const generatedRun: fc.Arbitrary<GeneratedRun> = fc
  .tuple(fc.array(oneRun, { minLength: 1, maxLength: 2 }), fc.array(fault, { maxLength: 3 }), fc.dictionary(fc.constantFrom("k0", "k9"), value, { maxKeys: 2 }))
  .map(([runs, faults, state]) => {
    let events: JsonObject[] = [];
    runs.forEach(([specs, picks], r) => {
      const runId = `r${r + 1}`;
      const spans = specs.map((s, k) => spanEvents(s, `${r + 1}_${k}`));
      events.push({ type: "RUN_STARTED", threadId: THREAD, runId }, ...interleave(spans, picks), { type: "RUN_FINISHED", threadId: THREAD, runId });
    });
    // A cut goes last: it stops the stream the other faults made.
    const ordered = [...faults.filter((f) => f.kind !== "cut"), ...faults.filter((f) => f.kind === "cut")];
    ordered.forEach((f, n) => (events = inject(events, f, n)));
    return { input: { threadId: THREAD, runId: "r1", state: state as JsonObject }, events, faults: ordered.map((f) => f.kind) };
  });

/** The SSE text a server sends for these events. */
export const toSse = (events: readonly JsonObject[]): string => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("");

/** The events of an LF-framed SSE text (what fix writes): each block's data lines joined, parsed. */
export function fromSse(text: string): JsonObject[] {
  const out: JsonObject[] = [];
  for (const block of text.split("\n\n")) {
    const data = block
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""));
    if (data.length > 0) out.push(JSON.parse(data.join("\n")) as JsonObject);
  }
  return out;
}
