import type { EventView, FindingView as Finding, Kind, Report, StreamDetail as Detail, StreamList as List } from "../api.js";
import { badge, bytes, changes, diff, h, short, tree, type Json } from "./view.js";
import { APPLIES_MEANS, counts, delivery, legend } from "./words.js";

/**
 * The inspector's page (issue 25): the streams the proxy fixed, one stream's
 * timeline, an event's ops as sent beside the ops as forwarded with each
 * finding, the state the client holds after any event, and the diff between
 * two. Live, it reads the inspector's API (protocol/README.md, "The
 * inspector") and follows its SSE feed; as `check --html`'s report, it reads
 * the data embedded in the page and asks for nothing, rendered before the
 * first paint: the script runs as the page is parsed, after its data.
 */

const TOKEN_KEY = "agui-state-inspector-token";

const reportEl = document.getElementById("report");
const report = reportEl ? (JSON.parse(reportEl.textContent ?? "null") as Report) : undefined;

/** The token: taken once from ?token=, then kept for this tab's session only, and out of the address bar. */
function takeToken(): string | undefined {
  const url = new URL(location.href);
  const given = url.searchParams.get("token");
  if (given !== null) {
    sessionStorage.setItem(TOKEN_KEY, given);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}
const token = report ? undefined : takeToken();
const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };

async function api<T>(path: string): Promise<T> {
  const res = await fetch(path, { headers, cache: "no-store" });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${(await res.text()).slice(0, 200)}`);
  return (await res.json()) as T;
}

// ------------------------------------------------------------------ model

let list: List = report?.list ?? { caps: { streams: 0, events: 0, bytes: 0 }, dropped: 0, streams: [] };
const details = new Map<string, Detail>(report ? Object.entries(report.streams) : []);
/** The stream and event picked; undefined follows the newest. */
let pickedStream: string | undefined;
let pickedEvent: number | undefined;
let diffFrom: number | undefined;
let diffTo: number | undefined;
let status = report ? "report" : "connecting";

const shownStream = (): string | undefined => pickedStream ?? list.streams[0]?.id;

/**
 * How many of a stream's latest events the page holds while it follows: a
 * stream of thousands of events a second is still one small request per
 * tick for the proxy, and one small table for the browser.
 */
const FOLLOW = 200;
/** Streams whose every kept event the user asked for. */
const full = new Set<string>();

/** Brings a stream's events up to date: only those after the last one held. */
async function load(id: string): Promise<void> {
  if (report) return;
  const held = details.get(id);
  const all = full.has(id);
  // Paused on a picked event: the list moves on, the stream's timeline waits.
  if (held && pickedEvent !== undefined && !all) return;
  const last = held?.events[held.events.length - 1]?.n ?? 0;
  const query = all ? (held ? `?after=${last}` : "") : `?after=${last}&limit=${FOLLOW}`;
  const fresh = await api<Detail>(`/api/streams/${encodeURIComponent(id)}${query}`);
  // A gap (the proxy moved on by more than a page): the page starts again from what came.
  const joins = held !== undefined && (fresh.events.length === 0 || fresh.events[0]?.n === last + 1);
  let events = (joins ? [...held.events, ...fresh.events] : fresh.events).filter((e) => e.n > fresh.evicted);
  if (!all && events.length > FOLLOW) events = events.slice(events.length - FOLLOW);
  details.set(id, { ...fresh, events });
}

// ------------------------------------------------------------------ render

const root = h("div", { id: "app" });
document.body.append(root);

/** An event's findings counted by kind (one about an op the client would have applied as sent has none, §13). */
function kindsOf(findings: readonly Finding[]): Partial<Record<Kind, number>> {
  const out: Partial<Record<Kind, number>> = {};
  for (const f of findings) if (f.kind !== undefined) out[f.kind] = (out[f.kind] ?? 0) + 1;
  return out;
}

/**
 * When the event happened. Live: the time from the stream's start to the
 * proxy's reading it. In a report, a file's reading time means nothing: the
 * event's own `timestamp` (AG-UI's BaseEvent, ms since the epoch), if it has
 * one, as a UTC time of day.
 */
function timeOf(e: EventView): { text: string; title?: string } | undefined {
  if (e.ms !== undefined) return { text: `+${e.ms} ms` };
  const ts = typeof e.sent === "object" && e.sent !== null && !Array.isArray(e.sent) ? e.sent["timestamp"] : undefined;
  if (typeof ts !== "number" || !Number.isFinite(ts) || Math.abs(ts) > 8.64e15) return undefined;
  const iso = new Date(ts).toISOString();
  return { text: iso.slice(11, 23), title: iso };
}

function streamList(): HTMLElement {
  const nav = h("nav", { id: "streams" }, h("h2", {}, "Streams"));
  if (list.dropped > 0) nav.append(h("p", { class: "note", id: "dropped-streams" }, `${list.dropped} older stream${list.dropped === 1 ? "" : "s"} dropped to keep the last ${list.caps.streams}.`));
  if (list.streams.length === 0) nav.append(h("p", { class: "muted" }, "No event stream yet: run an agent through the proxy."));
  const ul = h("ul", {});
  const shown = shownStream();
  for (const s of list.streams) {
    const li = h(
      "li",
      { "data-stream": s.id, class: s.id === shown ? "picked" : undefined },
      h("div", { class: "line" }, h("strong", {}, s.threadId ?? "(no thread id)"), " ", badge(`status-${s.status}`, s.status)),
      h("div", { class: "muted small" }, `run ${s.runId ?? "—"} · ${s.method} ${s.path}`),
      h("div", { class: "muted small" }, `${new Date(s.started).toLocaleTimeString()} · ${s.seen} events`),
      counts(s.kinds, s.outcomes),
    );
    li.addEventListener("click", () => {
      pickedStream = s.id;
      pickedEvent = diffFrom = diffTo = undefined;
      void refresh(true);
    });
    ul.append(li);
  }
  nav.append(ul);
  return nav;
}

function timeline(d: Detail, picked: number | undefined): HTMLElement {
  const body = h("tbody", {});
  // Times only where there are any (a report's input may have none); the outcome only live (check sends nothing).
  const timed = d.events.some((e) => timeOf(e) !== undefined);
  for (const e of d.events) {
    const time = timed ? timeOf(e) : undefined;
    const tr = h(
      "tr",
      { "data-n": String(e.n), class: e.n === picked ? "picked" : undefined },
      h("td", { class: "num" }, e.n),
      h("td", { class: "type" }, e.type || "(unreadable)"),
      timed ? h("td", { class: "num time", title: time?.title }, time?.text ?? "") : null,
      h("td", { class: "num" }, bytes(e.bytes)),
      report ? null : h("td", { class: "outcome" }, delivery(e.delivery)),
      h("td", { class: "findings" }, counts(kindsOf(e.findings), undefined, false)),
    );
    tr.addEventListener("click", () => {
      pickedEvent = e.n;
      diffFrom = diffTo = undefined;
      render();
    });
    body.append(tr);
  }
  const heads = ["#", "type", timed ? (report ? "time (UTC)" : "time") : null, "size", report ? null : "outcome", "findings"];
  const table = h("table", { id: "timeline" }, h("thead", {}, h("tr", {}, ...heads.map((t) => (t === null ? null : h("th", {}, t))))), body);
  const note = d.evicted > 0 ? h("p", { class: "note", id: "evicted" }, `${d.evicted} older event${d.evicted === 1 ? "" : "s"} of this stream dropped to stay within ${d.caps.events} events and ${bytes(d.caps.bytes)}.`) : null;
  const first = d.events[0]?.n ?? 0;
  let more: HTMLElement | null = null;
  if (first > d.evicted + 1) {
    const button = h("button", { type: "button", id: "load-all" }, "Load them");
    button.addEventListener("click", () => {
      full.add(d.id);
      details.delete(d.id);
      void refresh(true);
    });
    more = h("p", { class: "note", id: "not-loaded" }, `Following: events ${d.evicted + 1} to ${first - 1} are kept by the inspector but not loaded here. `, button);
  }
  return h("section", { class: "timeline" }, note, more, table);
}

const opsOf = (e: Json | undefined): Json[] | undefined => {
  if (typeof e !== "object" || e === null || Array.isArray(e)) return undefined;
  const ops = e["type"] === "ACTIVITY_DELTA" ? e["patch"] : e["delta"];
  return Array.isArray(ops) ? ops : undefined;
};

function opList(ops: Json[], findings: readonly Finding[]): HTMLElement {
  const ol = h("ol", { class: "ops", start: "0" });
  ops.forEach((op, i) => {
    const mine = findings.filter((f) => f.index === i);
    const o = typeof op === "object" && op !== null && !Array.isArray(op) ? op : undefined;
    const text = o && typeof o["op"] === "string" && typeof o["path"] === "string" ? [h("strong", {}, o["op"]), " ", h("code", {}, o["path"]), o["from"] !== undefined ? [" from ", h("code", {}, short(o["from"]))] : null, o["value"] !== undefined ? [" ", h("code", { class: "muted" }, short(o["value"], 160))] : null].flat() : [h("code", {}, short(op, 200))];
    ol.append(h("li", { class: mine.length ? `op outcome-${mine[0]?.outcome}` : "op" }, ...text, ...mine.map((f) => badge(`outcome-${f.outcome}`, f.outcome, f.code))));
  });
  return ol;
}

function eventPane(e: EventView): HTMLElement {
  // check --html: nothing was forwarded, check sends nothing; the event is as the client reads it.
  const sec = h("section", { id: "event" }, h("h3", {}, `Event ${e.n}: ${e.type || "(unreadable)"}`, " ", report ? null : delivery(e.delivery)));
  if (e.elided) return sec.append(h("p", { class: "note" }, "This event alone passed the stream's byte cap: its text was not kept.")), sec;
  const sentOps = opsOf(e.sent);
  if (sentOps) {
    const fwd = report ? null : e.delivery === "discarded" ? h("p", { class: "muted" }, "Discarded: the client gets nothing for this event.") : e.delivery === "passed" ? opList(sentOps, []) : opsOf(e.forwarded) ? opList(opsOf(e.forwarded) as Json[], []) : h("pre", {}, JSON.stringify(e.forwarded, null, 2));
    sec.append(h("div", { class: "sides" }, h("div", { class: "side", id: "ops-sent" }, h("h4", {}, "Ops as the server sent them"), opList(sentOps, e.findings)), fwd ? h("div", { class: "side", id: "ops-forwarded" }, h("h4", {}, "Ops as forwarded"), fwd) : null));
  } else {
    const sent = h("pre", {}, e.sent !== undefined ? JSON.stringify(e.sent, null, 2) : (e.sentText ?? ""));
    sec.append(h("div", { class: "sides" }, h("div", { class: "side" }, h("h4", {}, "As sent"), sent), e.delivery === "mended" ? h("div", { class: "side" }, h("h4", {}, "As forwarded"), h("pre", {}, JSON.stringify(e.forwarded, null, 2))) : null));
  }
  if (e.findings.length > 0) {
    const ul = h("ul", { class: "findings" });
    for (const f of e.findings) {
      const where = f.index !== undefined ? `op ${f.index}${f.pointer !== undefined ? ` at ${f.pointer}` : ""}: ` : "";
      // No kind: the client would have applied the op as sent; the repair rewrote or left it out all the same (§13), in fix's words.
      const kind = f.kind === undefined ? h("span", { class: "muted", title: APPLIES_MEANS }, "applies as sent") : badge(`kind-${f.kind}`, f.kind);
      ul.append(h("li", { class: `finding outcome-${f.outcome}${f.kind === undefined ? "" : ` kind-${f.kind}`}` }, kind, badge(`outcome-${f.outcome}`, f.outcome), " ", h("code", {}, f.code), " ", where, f.message, f.hint ? h("div", { class: "muted" }, `Hint: ${f.hint}`) : null));
    }
    sec.append(h("h4", {}, "Findings"), ul);
  }
  return sec;
}

/** The state after event n (0: the baseline), if it is known. */
function stateAt(d: Detail, n: number): Json | undefined {
  if (n === 0) return d.evicted === 0 ? d.baseline : undefined;
  return d.events.find((e) => e.n === n)?.state;
}

function statePane(d: Detail, e: EventView | undefined): HTMLElement {
  const n = e?.n ?? 0;
  const state = stateAt(d, n);
  const title = e ? `State the client holds after event ${n}` : "State the client holds before the stream";
  const sec = h("section", { id: "state", "data-after": String(n) }, h("h3", {}, title));
  if (state === undefined) return sec.append(h("p", { class: "muted" }, "Not kept.")), sec;
  sec.append(tree(state), h("details", {}, h("summary", {}, "as JSON"), h("pre", { id: "state-json" }, JSON.stringify(state, null, 2))));
  return sec;
}

function diffPane(d: Detail, e: EventView | undefined): HTMLElement {
  const choices = [...(d.evicted === 0 ? [0] : []), ...d.events.filter((x) => !x.elided).map((x) => x.n)];
  const to = diffTo ?? e?.n ?? 0;
  const before = choices.filter((c) => c < to);
  const from = diffFrom ?? before[before.length - 1] ?? to;
  const select = (id: string, value: number, set: (n: number) => void): HTMLSelectElement => {
    const s = h("select", { id });
    for (const c of choices) s.append(h("option", { value: String(c), ...(c === value ? { selected: "" } : {}) }, c === 0 ? "before the stream" : `after event ${c}`));
    s.addEventListener("change", () => {
      set(Number(s.value));
      render();
    });
    return s;
  };
  return h("section", { id: "diff" }, h("h3", {}, "Diff"), h("p", {}, "From ", select("diff-from", from, (n) => (diffFrom = n)), " to ", select("diff-to", to, (n) => (diffTo = n))), changes(diff(stateAt(d, from), stateAt(d, to))));
}

function render(): void {
  const id = shownStream();
  const d = id === undefined ? undefined : details.get(id);
  const head = report ? reportHead(report) : h("header", {}, h("h1", {}, "agui-state inspector"), badge(`live-${status}`, status), h("span", { class: "muted small", id: "caps" }, list.caps.streams ? `keeps the last ${list.caps.streams} streams, ${list.caps.events} events and ${bytes(list.caps.bytes)} each; nothing on disk` : ""));
  if (!report) {
    const follow = h("button", { id: "follow", type: "button" }, "Follow the latest");
    follow.addEventListener("click", () => {
      pickedStream = pickedEvent = diffFrom = diffTo = undefined;
      full.clear();
      void refresh(true);
    });
    head.append(follow);
  }
  const main = h("main", {});
  if (d) {
    const picked = pickedEvent !== undefined && d.events.some((e) => e.n === pickedEvent) ? pickedEvent : d.events[d.events.length - 1]?.n;
    const e = d.events.find((x) => x.n === picked);
    // The list is fresher than a paused timeline.
    const now = list.streams.find((x) => x.id === d.id) ?? d;
    const newer = now.seen - (d.events[d.events.length - 1]?.n ?? 0);
    const paused = pickedEvent !== undefined && newer > 0 && !report ? h("p", { class: "note", id: "paused" }, `Paused on event ${pickedEvent}: ${newer} newer event${newer === 1 ? "" : "s"} since; "Follow the latest" goes on.`) : null;
    main.append(
      h(
        "section",
        { id: "stream-head" },
        h("h2", {}, `${report ? "Thread" : `Stream ${d.id}: thread`} ${d.threadId ?? "—"}, run ${d.runId ?? "—"}`),
        h("p", { class: "muted" }, report ? `${now.seen} events · ` : `${d.method} ${d.path} · started ${d.started} · ${now.seen} events · `, badge(`status-${now.status}`, now.status), " ", report ? counts(now.kinds) : counts(now.kinds, now.outcomes)),
        report ? legend(now.kinds) : legend(now.kinds, now.outcomes),
        paused,
      ),
      h("div", { class: "columns" }, timeline(d, picked), h("div", { class: "detail" }, e ? eventPane(e) : null, statePane(d, e), diffPane(d, e))),
    );
  } else main.append(h("p", { class: "muted" }, id === undefined ? "Waiting for the first event stream." : "Loading…"));
  // Scroll positions survive the redraw.
  const scrolls = [...root.querySelectorAll(".timeline, .detail, #streams")].map((el) => el.scrollTop);
  // A report is about one stream: no list of streams.
  root.replaceChildren(head, h("div", { class: "body" }, report ? null : streamList(), main));
  [...root.querySelectorAll(".timeline, .detail, #streams")].forEach((el, i) => (el.scrollTop = scrolls[i] ?? 0));
  if (pickedEvent === undefined) root.querySelector(".timeline")?.scrollTo({ top: 1e9 });
}

/** A report's header: the file it is about (name, events, size), not a proxy's caps. */
function reportHead(r: Report): HTMLElement {
  const events = r.list.streams[0]?.seen ?? 0;
  document.title = `agui-state check: ${r.file.name}`;
  return h("header", {}, h("h1", {}, "agui-state check"), h("span", { id: "file" }, h("code", {}, r.file.name), ` · ${events} event${events === 1 ? "" : "s"} · ${bytes(r.file.bytes)}`));
}

// -------------------------------------------------------------------- live

let busy = false;
let again = false;
/** Reads the list and the shown stream's new events, one refresh at a time. */
async function refresh(now = false): Promise<void> {
  if (now) render();
  if (report) return render();
  if (busy) return void (again = true);
  busy = true;
  try {
    list = await api<List>("/api/streams");
    const id = shownStream();
    if (id !== undefined) await load(id);
    for (const k of details.keys()) if (!list.streams.some((s) => s.id === k)) details.delete(k);
  } catch (e) {
    status = "error";
    document.title = `agui-state inspector: ${(e as Error).message}`;
  } finally {
    busy = false;
  }
  render();
  if (again) {
    again = false;
    void refresh();
  }
}

/** The live feed, read with fetch so that it carries the token as a header (EventSource cannot). */
async function follow(): Promise<void> {
  for (;;) {
    try {
      const res = await fetch("/api/live", { headers, cache: "no-store" });
      if (!res.ok || !res.body) throw new Error(String(res.status));
      status = "live";
      await refresh();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let rest = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        const blocks = (rest + value).split("\n\n");
        rest = blocks.pop() ?? "";
        if (blocks.some((b) => b.startsWith("event: streams"))) await refresh();
      }
    } catch {
      // The proxy stopped, or the connection broke: say so, and try again.
    }
    status = "offline";
    render();
    await new Promise((r) => setTimeout(r, 2000));
  }
}

if (report) render();
else {
  render();
  void follow();
}
