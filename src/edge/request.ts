import { pathOf } from "../resume/edge.js";

/**
 * The request side of the stream edge (protocol/README.md §14), decided once: which requests a
 * middleware handles, and how much of a handled request's body it keeps. The sidecar answers the
 * middleware with these (classifyRequest), and the proxy reads its own tap by the same limit, so
 * the four servers cannot drift (test/fixtures/stream-edge/cases.json). Before issue 39 each
 * middleware matched paths its own way (a subtree, a subtree only with a trailing "/", the exact
 * path) and read the body with three different limits.
 */

/** The default of --max-request-body: the request body kept for its RunAgentInput. */
export const DEFAULT_MAX_REQUEST_BODY = 32 * 1024 * 1024;

/**
 * Whether a middleware whose `paths` option is `paths` handles a request for `target`: its path
 * (query taken off) is an entry, or lies below one. An entry's trailing "/" is ignored, so `/agent`
 * and `/agent/` both handle `/agent`, `/agent/` and `/agent/run`, and neither handles `/agents`.
 * No `paths`: every request.
 */
export function handles(paths: readonly string[] | undefined, target: string): boolean {
  if (paths === undefined) return true;
  const path = pathOf(target);
  return paths.some((entry) => {
    const base = entry.replace(/\/+$/, "");
    return base === "" || path === base || path.startsWith(`${base}/`);
  });
}

/** The index of the first entry that is no path (one not starting with "/"), or -1. */
export const badPath = (paths: readonly string[]): number => paths.findIndex((p) => !p.startsWith("/"));

/**
 * How many bytes of a request body a middleware keeps for openStream's `request.body`: the
 * operator's --max-request-body, and at most half a message, so that the body, escaped as a JSON
 * string inside the call, still fits the sidecar's --max-message-bytes (§7).
 */
export const bodyBytes = (maxRequestBody: number, maxMessageBytes: number): number => Math.min(maxRequestBody, Math.floor(maxMessageBytes / 2));
