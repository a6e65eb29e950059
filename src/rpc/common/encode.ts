import { finishFloats, floatMark } from "../../json/stringify.js";
import type { Id } from "./wire.js";

/**
 * JSON text of a successful response: exactly stringifyJson of
 * `{ jsonrpc: "2.0", id, result }` (wire.ts's result()), which is
 * JSON.stringify's text with an IntegralFloat written as `1.0`. A change result
 * carries its delta twice, as `delta` and in its event, as a STATE_DELTA's
 * `delta` or an ACTIVITY_DELTA's `patch` (the same array, by
 * protocol/README.md §6 and §10), and JSON.stringify would write it out twice. Here
 * it is serialized once and its text used in both places. Only the objects on
 * the way to the delta (the result, the events array and the STATE_DELTA
 * event) are written member by member; every other value goes to one
 * JSON.stringify call, in the same member order.
 *
 * Measured on an applyOps response, this is faster than either JSON.stringify
 * of the whole result or a generic member-by-member walk (which pays a closure
 * and an includes() per value): docs/benchmarks.md, "Figures behind choices in
 * the source".
 */
export function encodeResult(id: Id, result: object): string {
  // A number that came in as `1.0` goes out so (protocol/README.md §3): see stringify.ts.
  const mark = floatMark();
  const head = `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`;
  const delta = (result as { delta?: unknown }).delta;
  const events = (result as { events?: unknown }).events;
  if (!Array.isArray(delta) || delta.length === 0 || !Array.isArray(events) || events.length === 0) return finishFloats(mark, `${head}${JSON.stringify(result)}}`);
  return finishFloats(mark, `${head}${withDelta(result, delta, JSON.stringify(delta), events)}}`);
}

/** An object's members, JSON.stringify's way, with `delta` as `text` and `events` through eventsText. */
function withDelta(o: object, delta: unknown[], text: string, events: unknown[] | undefined): string {
  let out = "{";
  for (const key of Object.keys(o)) {
    const v = (o as Record<string, unknown>)[key];
    // JSON.stringify leaves out members whose value is undefined; so does this.
    if (v === undefined) continue;
    const value = v === delta ? text : v === events ? eventsText(events, delta, text) : scalar(v);
    out += `${out.length > 1 ? "," : ""}${quote(key)}:${value}`;
  }
  return `${out}}`;
}

function eventsText(events: unknown[], delta: unknown[], text: string): string {
  let out = "[";
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    // STATE_DELTA carries it as `delta`, ACTIVITY_DELTA as `patch` (protocol/README.md §10).
    const carries = typeof e === "object" && e !== null && ((e as { delta?: unknown }).delta === delta || (e as { patch?: unknown }).patch === delta);
    // JSON.stringify writes a hole or undefined in an array as null.
    out += `${i > 0 ? "," : ""}${carries ? withDelta(e, delta, text, undefined) : (JSON.stringify(e) ?? "null")}`;
  }
  return `${out}]`;
}

/** Member names repeat on every response (version, delta, events, type...): quoted once each. */
const quoted = new Map<string, string>();
function quote(key: string): string {
  let q = quoted.get(key);
  if (q === undefined) {
    q = JSON.stringify(key);
    if (quoted.size < 256) quoted.set(key, q);
  }
  return q;
}

/** JSON.stringify(v), without its call overhead for a finite number. */
const scalar = (v: unknown): string => (typeof v === "number" && Number.isFinite(v) ? String(v) : (JSON.stringify(v) as string));
