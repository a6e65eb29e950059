/**
 * JSON-RPC 2.0 messages as tests build and check them: requests and
 * notifications to send, and a strict reading of what comes back.
 */

export type Id = string | number | null;

export interface RpcError {
  code: number;
  message: string;
  data?: { code?: string; [k: string]: unknown };
}

export type Response = { jsonrpc: "2.0"; id: Id; result: unknown } | { jsonrpc: "2.0"; id: Id; error: RpcError };

/** A request object; a test encodes it with ndjson(), lsp() or encode() (scripts/harness/frames.ts). */
export const request = (id: Id, method: string, params?: unknown): Record<string, unknown> =>
  params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };

export const notification = (method: string, params?: unknown): Record<string, unknown> =>
  params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params };

/**
 * Checks that `v` is one well-formed JSON-RPC 2.0 response: exactly the
 * members jsonrpc, id and one of result/error, and a well-formed error.
 */
export function asResponse(v: unknown): Response {
  const fail = (why: string): never => {
    throw new Error(`not a JSON-RPC response (${why}): ${JSON.stringify(v)?.slice(0, 300)}`);
  };
  if (typeof v !== "object" || v === null || Array.isArray(v)) return fail("not an object");
  const r = v as Record<string, unknown>;
  if (r["jsonrpc"] !== "2.0") fail("jsonrpc is not 2.0");
  const id = r["id"];
  if (!("id" in r) || !(typeof id === "string" || typeof id === "number" || id === null)) fail("bad id");
  const keys = Object.keys(r).sort().join(",");
  if (keys === "error,id,jsonrpc") {
    const e = r["error"] as Record<string, unknown> | null;
    if (typeof e !== "object" || e === null || !Number.isInteger(e["code"]) || typeof e["message"] !== "string") fail("bad error object");
  } else if (keys !== "id,jsonrpc,result") fail(`members are ${keys}`);
  return v as Response;
}

/** Every frame as a single response (no batches). */
export function responses(frames: unknown[]): Response[] {
  return frames.map(asResponse);
}

/** The responses in a frame: a batch reply's members, or the one response. A batch reply is never empty. */
export function membersOf(frame: unknown): Response[] {
  if (!Array.isArray(frame)) return [asResponse(frame)];
  if (frame.length === 0) throw new Error("an empty array of responses");
  return frame.map(asResponse);
}

/** The error of a response, failing when it is a result. */
export function errorOf(r: Response | undefined): RpcError {
  if (!r || !("error" in r)) throw new Error(`expected an error response, got ${JSON.stringify(r)}`);
  return r.error;
}

/** The result of a response, failing when it is an error. */
export function resultOf(r: Response | undefined): unknown {
  if (!r || !("result" in r)) throw new Error(`expected a result, got ${JSON.stringify(r)}`);
  return r.result;
}
