import type { ErrorCodes as JsonRpcErrorCodes, RequestMessage, ResponseError, ResponseMessage } from "vscode-jsonrpc";
import type { IntegralFloat } from "../../core/index.js";
import { APPLICATION_ERROR_CODES, type CallError } from "../../protocol/errors.js";
import type {
  InternalErrorData,
  InvalidParamsData,
  InvalidRequestData,
  LimitExceededData,
  MethodNotFoundData,
  ParseErrorData,
  PatchFailedData,
  ResumeUnknownData,
  UnknownActivityData,
  UnknownReadData,
  UnknownStreamData,
  UnknownThreadData,
  VersionConflictData,
} from "../../protocol/types.js";

/**
 * The JSON-RPC 2.0 wire model is vscode-jsonrpc's, the one the LSP world
 * knows: its RequestMessage, ResponseMessage, ResponseError (as its toJson()
 * puts it on the wire) and ErrorCodes. Only its types are used here.
 * They cost nothing at run time, whereas importing a value from the package
 * would load all of its connection machinery for five numbers, in bundle size
 * and start-up time (docs/benchmarks.md, "Figures behind choices in the source").
 */

/**
 * A request's id as read (JSON-RPC 2.0 §4): vscode-jsonrpc's, or a whole
 * number written as a float (`7.0`, an IntegralFloat), which the response
 * echoes as it came (protocol/README.md §3).
 */
export type Id = RequestMessage["id"] | IntegralFloat;

/** A response as the sidecar writes it: vscode-jsonrpc's ResponseMessage, with its id as read. */
export type Response = Omit<ResponseMessage, "id"> & { id: Id };

/** The `data` of every error the sidecar sends, as protocol/README.md §8 gives it. */
export type ErrorData =
  | ParseErrorData
  | InvalidRequestData
  | MethodNotFoundData
  | InvalidParamsData
  | InternalErrorData
  | UnknownThreadData
  | UnknownActivityData
  | UnknownStreamData
  | ResumeUnknownData
  | UnknownReadData
  | PatchFailedData
  | LimitExceededData
  | VersionConflictData;

/** A JSON-RPC error object: vscode-jsonrpc's ResponseError, as its toJson() puts it on the wire. */
export type WireError = ReturnType<ResponseError<ErrorData>["toJson"]>;

type Standard = "ParseError" | "InvalidRequest" | "MethodNotFound" | "InvalidParams" | "InternalError";

/** JSON-RPC 2.0 §5.1's codes, as vscode-jsonrpc's ErrorCodes has them: a different number fails to compile. */
export const ErrorCodes: Pick<typeof JsonRpcErrorCodes, Standard> = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
};

export const result = (id: Id, value: object): Response => ({ jsonrpc: "2.0", id, result: value });
export const failed = (id: Id, error: WireError): Response => ({ jsonrpc: "2.0", id, error });

export const parseError = (why: string): WireError => ({ code: ErrorCodes.ParseError, message: `parse error: ${why}`, data: { code: "PARSE_ERROR" } });

export const invalidRequest = (why: string): WireError => ({ code: ErrorCodes.InvalidRequest, message: `invalid request: ${why}`, data: { code: "INVALID_REQUEST" } });

export const methodNotFound = (method: string): WireError => ({
  code: ErrorCodes.MethodNotFound,
  message: `method not found: ${JSON.stringify(method.slice(0, 100))}`,
  data: { code: "METHOD_NOT_FOUND", method },
});

export const internalError = (): WireError => ({ code: ErrorCodes.InternalError, message: "internal error; the process goes on serving", data: { code: "INTERNAL_ERROR" } });

/** The JSON-RPC code of each error a call can fail with (protocol/README.md §8). */
const CODES: { readonly [K in CallError["kind"]]: number } = { ...APPLICATION_ERROR_CODES, InvalidParams: ErrorCodes.InvalidParams };

export const toWireError = (e: CallError): WireError => ({ code: CODES[e.kind], message: e.message, data: e.data });
