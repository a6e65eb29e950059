/**
 * The inspector page's building blocks. Everything the page shows goes in
 * as text nodes or attribute values (never as HTML): keys and values of the
 * state, event types, finding messages are all the agent's text, and may be
 * markup or script (issue 25, §2).
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

type Child = Node | string | number | false | null | undefined;

/** An element with attributes set as attributes (strings) and children appended as text or nodes. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string | undefined> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) el.setAttribute(k, v);
  for (const c of children) if (c !== false && c !== null && c !== undefined) el.append(typeof c === "number" ? String(c) : c);
  return el;
}

const isObject = (v: Json): v is { [key: string]: Json } => typeof v === "object" && v !== null && !Array.isArray(v);

/** RFC 6901 §3: a key as a reference token. */
const token = (k: string): string => k.replace(/~/g, "~0").replace(/\//g, "~1");

/** One scalar, as JSON, with a class for its type. */
function scalar(v: Json): HTMLElement {
  const cls = v === null ? "null" : typeof v;
  return h("span", { class: `v ${cls}` }, JSON.stringify(v));
}

/** The state as a tree: objects and arrays fold; the first levels start open. */
export function tree(value: Json, depth = 0): HTMLElement {
  if (!isObject(value) && !Array.isArray(value)) return scalar(value);
  const entries: [string, Json][] = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
  const list = h("ul", { class: "tree" });
  for (const [k, v] of entries) {
    const key = h("span", { class: Array.isArray(value) ? "k index" : "k" }, Array.isArray(value) ? k : JSON.stringify(k));
    if (isObject(v) || Array.isArray(v)) {
      const size = Array.isArray(v) ? `[${v.length}]` : `{${Object.keys(v).length}}`;
      const d = h("details", depth < 2 ? { open: "" } : {}, h("summary", {}, key, h("span", { class: "size" }, ` ${size}`)), tree(v, depth + 1));
      list.append(h("li", {}, d));
    } else list.append(h("li", {}, key, ": ", scalar(v)));
  }
  if (entries.length === 0) return h("span", { class: "v empty" }, Array.isArray(value) ? "[]" : "{}");
  return list;
}

export interface Change {
  pointer: string;
  kind: "added" | "removed" | "changed";
  before?: Json;
  after?: Json;
}

/** What changed from `a` to `b`, member by member (arrays index by index), as JSON Pointers (RFC 6901). */
export function diff(a: Json | undefined, b: Json | undefined, pointer = "", out: Change[] = []): Change[] {
  if (a === undefined && b === undefined) return out;
  if (a === undefined) return out.push({ pointer, kind: "added", after: b as Json }), out;
  if (b === undefined) return out.push({ pointer, kind: "removed", before: a }), out;
  if (isObject(a) && isObject(b)) {
    for (const k of Object.keys(a)) diff(a[k], Object.hasOwn(b, k) ? b[k] : undefined, `${pointer}/${token(k)}`, out);
    for (const k of Object.keys(b)) if (!Object.hasOwn(a, k)) diff(undefined, b[k], `${pointer}/${token(k)}`, out);
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) diff(a[i], b[i], `${pointer}/${i}`, out);
    return out;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) out.push({ pointer, kind: "changed", before: a, after: b });
  return out;
}

/** A value in one line, cut at `max` characters. */
export function short(v: Json | undefined, max = 120): string {
  const s = v === undefined ? "" : (JSON.stringify(v) ?? "");
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** The list of changes from one event's state to another's. */
export function changes(list: readonly Change[]): HTMLElement {
  if (list.length === 0) return h("p", { class: "muted" }, "No change.");
  const ul = h("ul", { class: "changes" });
  for (const c of list) {
    const sign = c.kind === "added" ? "+" : c.kind === "removed" ? "−" : "~";
    const what = c.kind === "added" ? short(c.after) : c.kind === "removed" ? short(c.before) : `${short(c.before, 60)} → ${short(c.after, 60)}`;
    ul.append(h("li", { class: `change ${c.kind}` }, h("span", { class: "sign" }, sign), " ", h("code", {}, c.pointer || "(root)"), " ", h("span", { class: "muted" }, what)));
  }
  return ul;
}

/** A badge: an outcome, a kind or a status. */
export const badge = (cls: string, text: string, title?: string): HTMLElement => h("span", { class: `badge ${cls}`, title }, text);

export const bytes = (n: number): string => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`);
