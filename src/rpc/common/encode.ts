/**
 * JSON text of a response. A change result carries its delta twice, as
 * `delta` and as the `delta` of its STATE_DELTA event (the same array, by
 * protocol/README.md §6), and JSON.stringify would write it out twice. Here
 * it is serialized once and its text used in both places; everything else
 * goes through JSON.stringify, member by member, in the same order, so the
 * text is exactly what JSON.stringify(response) gives.
 */
export function encodeResponse(response: object): string {
  const result = (response as { result?: unknown }).result;
  if (typeof result !== "object" || result === null) return JSON.stringify(response);
  const delta = (result as { delta?: unknown }).delta;
  const events = (result as { events?: unknown }).events;
  if (!Array.isArray(delta) || delta.length === 0 || !Array.isArray(events) || events.length === 0) return JSON.stringify(response);
  const text = JSON.stringify(delta);
  const value = (v: unknown): string => {
    if (v === delta) return text;
    if (v === result || (typeof v === "object" && v !== null && events.includes(v))) return members(v);
    if (v === events) return `[${events.map(value).join(",")}]`;
    return JSON.stringify(v);
  };
  const members = (o: object): string => {
    let out = "";
    for (const k of Object.keys(o)) {
      const v = (o as Record<string, unknown>)[k];
      // JSON.stringify leaves out members whose value is undefined; so does this.
      if (v === undefined) continue;
      out += `${out ? "," : "{"}${JSON.stringify(k)}:${value(v)}`;
    }
    return out ? `${out}}` : "{}";
  };
  return members(response);
}
