import type { ParseArgsConfig } from "node:util";
import { DEFAULT_MAX_REQUEST_BODY } from "../edge/request.js";
import { parseSize } from "./sizes.js";

/** The stream edge's flag, the proxy's and the sidecar's alike (protocol/README.md §14). */
export const EDGE_OPTIONS = {
  "max-request-body": { type: "string" },
} as const satisfies ParseArgsConfig["options"];

/** --max-request-body, else AGUI_STATE_MAX_REQUEST_BODY, else 32M: the request body kept for its RunAgentInput. */
export function maxRequestBody(values: Record<string, unknown>, env: NodeJS.ProcessEnv): number {
  const text = values["max-request-body"] ?? (env["AGUI_STATE_MAX_REQUEST_BODY"] || undefined);
  return text === undefined ? DEFAULT_MAX_REQUEST_BODY : parseSize("max-request-body", text, 1024);
}
