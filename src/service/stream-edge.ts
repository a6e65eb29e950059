import { err, ok, type JsonObject } from "../core/index.js";
import { baselineMessage, baselineOfBody } from "../edge/baseline.js";
import { badPath, bodyBytes, handles } from "../edge/request.js";
import { repairedHead, streamOf } from "../edge/response.js";
import { invalidParams, type CallResult } from "../protocol/errors.js";
import type * as P from "../protocol/types.js";
import { classify, headerMap, pathOf, type HeaderPairs } from "../resume/edge.js";

/**
 * The stream edge as the sidecar answers it (protocol/README.md §14, issue 39): what a request is to a
 * middleware, and what an answer's head makes of its stream. The middleware hands over the raw
 * request and head and decides nothing: the rules are src/edge/'s, which the proxy follows too, so
 * the four servers are one implementation (test/fixtures/stream-edge/cases.json).
 */

/**
 * How much of the text answered for a middleware keeps, to feed a new sidecar after its sidecar died
 * (§14): a response's first 8 MiB rebuild the mirror exactly; past them only its head (fixStream's
 * `head`) is kept, so a middleware's memory per stream stays bounded.
 */
export const REPLAY_BYTES = 8 * 1024 * 1024;

/** classifyRequest: whether the middleware handles the request, and what it is (§14, §16). */
export function classifyRequest(p: P.ClassifyRequestParams, resumeOn: boolean, limits: { maxRequestBody: number; maxMessageBytes: number }): CallResult<P.ClassifyRequestResult> {
  const paths = p.paths ?? undefined;
  const bad = paths === undefined ? -1 : badPath(paths);
  if (bad >= 0) return err(invalidParams(`/paths/${bad}`, "INVALID_VALUE", `paths: each entry is a path starting with "/", such as "/agent"; got ${JSON.stringify(paths?.[bad])}`));
  if (!handles(paths, p.path)) return ok({ kind: "forward", handled: false });
  const kind = resumeOn && p.resume !== false ? classify({ method: p.method, path: p.path, headers: headerMap(p.headers as HeaderPairs) }) : "forward";
  return ok({ kind, handled: true, bodyBytes: bodyBytes(limits.maxRequestBody, limits.maxMessageBytes) });
}

/** openStream's request form, read: the answer passes untouched, or the stream to open, in the earlier form's terms. */
export type EdgeOpen = { pass: P.Note } | { params: P.OpenStreamParams; baseline?: P.Note; run?: { threadId: string; runId: string } };

/**
 * openStream's request form (§14): the response's head decides whether there is a stream and its
 * framing; the request's body its baseline, and, for SSE with resume, what the run is filed under.
 */
export function openFromRequest(p: P.OpenStreamParams, resumeOn: boolean): CallResult<EdgeOpen> {
  const { request, response } = p;
  if (request === undefined || response === undefined) return err(invalidParams(request === undefined ? "/request" : "/response", "MISSING", "openStream: request and response go together (the request form, protocol/README.md §14)"));
  const clash = p.state !== undefined ? "/state" : p.framing !== undefined ? "/framing" : p.resume !== undefined && typeof p.resume !== "boolean" ? "/resume" : undefined;
  if (clash !== undefined) return err(invalidParams(clash, "CONFLICTING_PARAMS", `openStream: ${clash.slice(1)} is read from request and response in the request form; leave it out (resume takes only false there)`));
  const stream = streamOf(response.headers as HeaderPairs);
  if ("pass" in stream) return ok({ pass: stream.pass });
  const base = baselineOfBody(request.body, headerMap(request.headers as HeaderPairs)["content-encoding"]);
  const resumable = resumeOn && stream.framing === "sse" && p.resume !== false;
  const resume: P.ResumeRun | undefined = resumable
    ? { path: pathOf(request.path), requestHeaders: request.headers, responseHeaders: response.headers, ...(base.threadId !== undefined ? { threadId: base.threadId } : {}), ...(base.messages !== undefined ? { messages: base.messages as NonNullable<P.ResumeRun["messages"]> } : {}) }
    : undefined;
  const params: P.OpenStreamParams = {
    ...(p.own !== undefined ? { own: p.own } : {}),
    ...(p.snapshots !== undefined ? { snapshots: p.snapshots } : {}),
    ...(p.joinKeys !== undefined ? { joinKeys: p.joinKeys } : {}),
    ...(p.lifecycle !== undefined ? { lifecycle: p.lifecycle } : {}),
    ...(p.resync !== undefined ? { resync: p.resync } : {}),
    framing: stream.framing,
    // A baseline that could not be read is not known: {} stands in for it (§13).
    ...(base.note === undefined ? { state: base.state as JsonObject } : {}),
    ...(resume ? { resume } : {}),
  };
  const run = { threadId: base.threadId ?? "agui-state", runId: base.runId ?? "agui-state" };
  return ok({ params, run, ...(base.note !== undefined ? { baseline: { code: base.note, message: baselineMessage(base.note) } } : {}) });
}

/** The request form's result members beside the stream's: the head to write, the replay bound, why the baseline is {}. */
export function edgeResult(open: Extract<EdgeOpen, { params: unknown }>, response: P.HttpResponseHead, resumable: boolean): Pick<P.OpenStreamResult, "headers" | "replayBytes" | "baseline"> {
  return { headers: repairedHead(response.headers as HeaderPairs, resumable), replayBytes: REPLAY_BYTES, ...(open.baseline ? { baseline: open.baseline } : {}) };
}
