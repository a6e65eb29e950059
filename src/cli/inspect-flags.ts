import type { ParseArgsConfig } from "node:util";
import { DEFAULT_CAPS } from "../inspect/store.js";
// A type only: the proxy is loaded by the command that runs it.
import type { InspectOptions } from "../proxy/main.js";
import { isLoopback } from "../rpc/node/listen-address.js";
import { UsageError } from "./options.js";
import { parseSize } from "./sizes.js";

/** `proxy --inspect`'s flags (issue 25). */
export const INSPECT_OPTIONS = {
  inspect: { type: "string" },
  "inspect-token": { type: "string" },
  "inspect-streams": { type: "string" },
  "inspect-events": { type: "string" },
  "inspect-bytes": { type: "string" },
} as const satisfies ParseArgsConfig["options"];

/** The environment variable a token may come from, so that it stays out of the process list. */
export const TOKEN_ENV = "AGUI_STATE_INSPECT_TOKEN";

/** Below this a token can be guessed by whoever can reach the port. */
const MIN_TOKEN = 16;

function count(values: Record<string, unknown>, flag: string, fallback: number): number {
  const text = values[flag];
  if (text === undefined) return fallback;
  const n = /^\d{1,9}$/.test(String(text)) ? Number(text) : NaN;
  if (!(n >= 1)) throw new UsageError(`--${flag}: expected a whole number of at least 1, got ${JSON.stringify(text)}`);
  return n;
}

/**
 * The inspector the flags ask for, or undefined without --inspect. A UsageError
 * for a non-loopback address without a token: the page shows users' state.
 */
export function inspectOptions(values: Record<string, unknown>, env: NodeJS.ProcessEnv, address: (text: string) => { host: string; port: number }): InspectOptions | undefined {
  const given = values["inspect"];
  const others = Object.keys(INSPECT_OPTIONS).filter((k) => k !== "inspect" && values[k] !== undefined);
  if (given === undefined) {
    if (others.length > 0) throw new UsageError(`--${others[0]} needs --inspect HOST:PORT`);
    return undefined;
  }
  const { host, port } = address(String(given));
  const token = (values["inspect-token"] as string | undefined) ?? (env[TOKEN_ENV] === "" ? undefined : env[TOKEN_ENV]);
  if (token !== undefined && (token.length < MIN_TOKEN || !/^[\x21-\x7e]+$/.test(token))) {
    throw new UsageError(`--inspect-token: expected at least ${MIN_TOKEN} printable ASCII characters without spaces`);
  }
  if (token === undefined && !isLoopback(host)) {
    throw new UsageError(`--inspect: ${host} is not a loopback address, and the inspector shows users' state; set --inspect-token TOKEN (or ${TOKEN_ENV}) to serve it there`);
  }
  return { host, port, token, caps: { streams: count(values, "inspect-streams", DEFAULT_CAPS.streams), events: count(values, "inspect-events", DEFAULT_CAPS.events), bytes: values["inspect-bytes"] === undefined ? DEFAULT_CAPS.bytes : parseSize("inspect-bytes", values["inspect-bytes"], 1024) } };
}
