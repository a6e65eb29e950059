import type { ParseArgsConfig } from "node:util";
import type { Path } from "../core/index.js";
import { ownedMembers } from "../edge/own.js";
// A type only: the stream pipeline is loaded by the command that runs it.
import type { Policy } from "../stream/client.js";
import { UsageError } from "./options.js";

/** The repair policy's flags, shared by `fix` and `proxy` (protocol/README.md §13). */
export const REPAIR_OPTIONS = {
  own: { type: "string", multiple: true },
  snapshots: { type: "string" },
  "join-keys": { type: "boolean" },
  lifecycle: { type: "string" },
} as const satisfies ParseArgsConfig["options"];

/** `--own POINTER`, repeatable: the members the server owns (§13), read alike by check, fix and proxy. */
export function ownedPaths(values: Record<string, unknown>): Path[] {
  const pointers = values["own"];
  const own = ownedMembers(Array.isArray(pointers) ? pointers.map(String) : []);
  if (!own.ok) throw new UsageError(`--own: ${own.error.message}`);
  return own.value;
}

/** The policy the flags ask for; a UsageError names the flag that is wrong. `env`: AGUI_STATE_LIFECYCLE stands in for --lifecycle. */
export function repairPolicy(values: Record<string, unknown>, env: NodeJS.ProcessEnv = {}): Policy {
  const own = ownedPaths(values);
  const snapshots = values["snapshots"] ?? "pass";
  if (snapshots !== "pass" && snapshots !== "delta") throw new UsageError(`--snapshots: expected pass or delta, got ${JSON.stringify(snapshots)}`);
  // protocol/README.md §13, the lifecycle's mends: off by default, since it sends events the server never sent.
  const lifecycle = values["lifecycle"] ?? (env["AGUI_STATE_LIFECYCLE"] || "pass");
  if (lifecycle !== "repair" && lifecycle !== "pass") throw new UsageError(`--lifecycle: expected repair or pass, got ${JSON.stringify(lifecycle)}`);
  return { own, snapshots, joinKeys: values["join-keys"] === true, lifecycle };
}
