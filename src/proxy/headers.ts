import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/**
 * RFC 9110 §7.6.1: headers that describe one connection, not the message, so
 * a proxy must not forward them. `proxy-authenticate`/`proxy-authorization`
 * are for this hop's proxy (RFC 2616 §13.5.1 lists them too). Node's own
 * framing (chunked or Content-Length) is chosen again on each side.
 */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"]);

/** The message's headers without the hop-by-hop ones, including any the `Connection` header names. */
export function endToEnd(headers: IncomingHttpHeaders, drop: readonly string[] = []): OutgoingHttpHeaders {
  const named = new Set(drop);
  const connection = headers["connection"];
  if (connection !== undefined) for (const token of connection.split(",")) named.add(token.trim().toLowerCase());
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Appends to a header that may already hold a comma-separated list (X-Forwarded-For from a proxy in front). */
function appendList(prior: string | string[] | undefined, value: string): string {
  const before = Array.isArray(prior) ? prior.join(", ") : prior;
  return before ? `${before}, ${value}` : value;
}

/**
 * The headers for the upstream request: the client's end-to-end headers, Host
 * set to the upstream's (as most reverse proxies do, so virtual hosts and TLS
 * names match), and the usual X-Forwarded-* so the upstream still knows who
 * asked and for which host.
 */
export function upstreamHeaders(headers: IncomingHttpHeaders, upstream: URL, client: { address: string | undefined; encrypted: boolean }): OutgoingHttpHeaders {
  const out = endToEnd(headers, ["host"]);
  out["host"] = upstream.host;
  if (client.address !== undefined) out["x-forwarded-for"] = appendList(headers["x-forwarded-for"], client.address);
  if (headers.host !== undefined && headers["x-forwarded-host"] === undefined) out["x-forwarded-host"] = headers.host;
  if (headers["x-forwarded-proto"] === undefined) out["x-forwarded-proto"] = client.encrypted ? "https" : "http";
  return out;
}

/** The upstream URL for a request target: the upstream's base path joined with the request's path and query. */
export function upstreamUrl(upstream: URL, target: string): URL {
  const base = upstream.pathname.replace(/\/+$/, "");
  // A target is origin-form ("/path?q") for a reverse proxy; anything else
  // (absolute-form, "*") is taken as a path so it cannot redirect the proxy.
  const path = target.startsWith("/") ? target : `/${target}`;
  return new URL(`${upstream.origin}${base}${path}`);
}
