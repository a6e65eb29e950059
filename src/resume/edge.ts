import { RESUMABLE_HEADER, RESUMABLE_VALUE } from "../web/resume/announce.js";

/**
 * The resume edge (protocol/README.md §16), decided once: what a request is (a rejoin, a reload or
 * one for the app), which of an answer's headers a rejoin gets again, what it is told when there is
 * nothing to give, and how an answer says it can be resumed. The proxy calls these in-process; the
 * sidecar answers the middleware with them (classifyRequest, rejoinStream, openStream's `resume`),
 * so the proxy and the three middleware cannot drift (test/fixtures/resume-edge/cases.json).
 */

/** Header pairs as a server received or sent them: any case, repeats allowed, in order. */
export type HeaderPairs = readonly (readonly [string, string])[];

/** Headers by lower-case name; repeats joined as HTTP joins them (RFC 9110 §5.3), cookies with "; " (RFC 6265 §5.4). */
export type HeaderMap = Readonly<Record<string, string>>;

export interface RequestHead {
  method: string;
  /** The request's target path, query allowed. */
  path: string;
  headers: HeaderMap;
}

/** `rejoin`: a dropped stream coming back (Last-Event-ID); `reload`: a page that lost everything (POST <agent>/connect); `forward`: the app's. */
export type RequestKind = "forward" | "rejoin" | "reload";

/** The suffix of a reload's path, after the agent's (CopilotKit's convention). */
export const CONNECT = "/connect";

/**
 * The longest threadId a run is filed under (counted in UTF-16 units, as the proxy reads it; the
 * sidecar's schema caps RPC threadIds at the same number of code points). A longer one names no
 * thread: its run can be rejoined by id but never reloaded, and nothing keys an unbounded string.
 */
export const MAX_THREAD_ID = 256;

export function headerMap(pairs: HeaderPairs): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [rawName, value] of pairs) {
    const name = rawName.toLowerCase();
    const had = out[name];
    out[name] = had === undefined ? value : `${had}${name === "cookie" ? "; " : ", "}${value}`;
  }
  return out;
}

/** The path without its query. */
export const pathOf = (target: string): string => target.split("?", 1)[0] as string;

/**
 * What a request is. A rejoin is a POST that carries a Last-Event-ID (the original request sent again,
 * as the SSE standard and resumableFetch send it); a reload is a POST to `<agent path>/connect`.
 * Only POST: AG-UI runs are posted, and an EventSource endpoint of the app's own (a GET that
 * reconnects with Last-Event-ID) is the app's to answer. An empty Last-Event-ID names nothing.
 */
export function classify(req: RequestHead): RequestKind {
  if (req.method.toUpperCase() !== "POST") return "forward";
  const last = req.headers["last-event-id"];
  if (last !== undefined && last !== "") return "rejoin";
  return pathOf(req.path).endsWith(CONNECT) ? "reload" : "forward";
}

/** The agent path a rejoin or reload names: the path without its query, and for a reload without `/connect`. */
export function agentPath(req: RequestHead, kind: RequestKind): string {
  const path = pathOf(req.path);
  return kind === "reload" ? path.slice(0, -CONNECT.length) || "/" : path;
}

/** RunAgentInput.threadId in a request body's text, as the client's JSON.parse reads it; undefined when the body is no JSON object. */
export function threadIdIn(body: string): unknown {
  try {
    const input: unknown = JSON.parse(body);
    return typeof input === "object" && input !== null ? (input as Record<string, unknown>)["threadId"] : undefined;
  } catch {
    return undefined;
  }
}

/** A threadId a run may be filed and found under: a string of 1 to MAX_THREAD_ID units; anything else names no thread (""). */
export const threadOf = (v: unknown): string => (typeof v === "string" && v.length <= MAX_THREAD_ID ? v : "");

/**
 * Response headers that belonged to one response and are never sent again to a rejoin: a cookie set
 * once, a length and an encoding of another body, and the hop-by-hop headers (RFC 9110 §7.6.1).
 */
const NOT_KEPT = new Set(["set-cookie", "content-length", "content-encoding", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"]);

/** The headers a rejoin of this answer is answered with: the run's own, less what was per response, with the announcement. */
export function keptHeaders(response: HeaderMap): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(response)) if (!NOT_KEPT.has(name)) out[name] = value;
  return { ...out, ...announcement(response) };
}

/**
 * What an answer that can be resumed adds to its head: the announcement, and, where the answer is
 * shared across origins (it has Access-Control-Allow-Origin), the announcement's name among the
 * headers a browser lets the page read (Fetch standard, CORS-safelisted response headers).
 */
export function announcement(response: HeaderMap): Record<string, string> {
  const out: Record<string, string> = { [RESUMABLE_HEADER]: RESUMABLE_VALUE };
  if (response["access-control-allow-origin"] !== undefined) {
    const exposed = response["access-control-expose-headers"];
    const names = exposed === undefined ? [] : exposed.split(",").map((s) => s.trim().toLowerCase());
    if (!names.includes("*") && !names.includes(RESUMABLE_HEADER)) out["access-control-expose-headers"] = exposed === undefined || exposed.trim() === "" ? RESUMABLE_HEADER : `${exposed}, ${RESUMABLE_HEADER}`;
  }
  return out;
}

export interface Refusal {
  status: 410 | 204;
  headers: Record<string, string>;
  body: string;
}

/** A refused, unknown, expired or ended rejoin: one answer for all, so a refusal tells nothing. */
export const GONE_BODY = JSON.stringify({ error: { code: "resume_unknown", message: "no run to resume from this Last-Event-ID: it is unknown, expired, or not yours; start a new run" } });

/** The answer when there is nothing to give: 410 Gone with a JSON body for a rejoin (start a new run), 204 No Content for a reload (an empty stream: nothing to apply). */
export function refusal(kind: "rejoin" | "reload"): Refusal {
  return kind === "rejoin" ? { status: 410, headers: { "content-type": "application/json" }, body: GONE_BODY } : { status: 204, headers: {}, body: "" };
}
