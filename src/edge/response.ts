import { announcement, headerMap, type HeaderPairs } from "../resume/edge.js";

/**
 * The response side of the stream edge (protocol/README.md §14), decided once: which answers are
 * event streams the repair reads, and the head a repaired answer goes out with. The proxy and the
 * sidecar's openStream (for the three middleware) both ask these.
 */

export type Framing = "sse" | "ndjson";

/** Why an answer is not repaired: a closed set, worded the same wherever a user reads it. */
export interface PassNote {
  code: "NOT_AN_EVENT_STREAM" | "CONTENT_ENCODED";
  message: string;
}

/**
 * NDJSON's media types as servers send them: the registered-looking application/x-ndjson, and the
 * JSON Lines names (jsonlines.org suggests application/jsonl). One list for every server: before
 * issue 39 the Python middleware knew 2, Go 5 and Clojure 3.
 */
const NDJSON_TYPES: ReadonlySet<string> = new Set(["application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonl", "application/jsonlines"]);

/** The media type of a Content-Type, in lower case, without its parameters (RFC 9110 §8.3.1). */
export const mediaType = (contentType: string | undefined): string => (contentType ?? "").split(";", 1)[0]!.trim().toLowerCase();

/** The framing of an answer by its Content-Type, or undefined when it is no AG-UI event stream. */
export function framingOf(contentType: string | undefined): Framing | undefined {
  const type = mediaType(contentType);
  if (type === "text/event-stream") return "sse";
  return NDJSON_TYPES.has(type) ? "ndjson" : undefined;
}

/** Whether a body in this Content-Encoding is plain text (none, or identity). */
export const plainEncoding = (encoding: string | undefined): boolean => encoding === undefined || encoding.trim() === "" || encoding.trim().toLowerCase() === "identity";

/**
 * What a middleware does with an answer whose head is `headers`: repair it in `framing`, or pass it
 * on untouched, and why. A middleware sees the body as the app wrote it; one in a content coding is
 * the compression's, outside it (the proxy, which sits outside, decodes gzip, deflate and br itself).
 */
export function streamOf(headers: HeaderPairs): { framing: Framing } | { pass: PassNote } {
  const head = headerMap(headers);
  const framing = framingOf(head["content-type"]);
  if (framing === undefined) return { pass: { code: "NOT_AN_EVENT_STREAM", message: `the response is not an AG-UI event stream (Content-Type ${JSON.stringify(head["content-type"] ?? "")}); passed on untouched` } };
  if (!plainEncoding(head["content-encoding"])) return { pass: { code: "CONTENT_ENCODED", message: `the event stream is content-encoded (${head["content-encoding"] ?? ""}); passing it through unrepaired (put the agui-state middleware inside the compression middleware)` } };
  return { framing };
}

/**
 * The head a repaired answer goes out with, as header pairs in the app's order: its own less
 * Content-Length (the repair changes the body's length; the server then frames it itself), with the
 * announcement in place of any header of the same name when the run is resumable (§16).
 */
export function repairedHead(headers: HeaderPairs, resumable: boolean): [string, string][] {
  const added = resumable ? announcement(headerMap(headers)) : {};
  const out: [string, string][] = [];
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (lower !== "content-length" && !(lower in added)) out.push([name, value]);
  }
  for (const [name, value] of Object.entries(added)) out.push([name, value]);
  return out;
}
