/**
 * Params and results of every method of protocol version 1, and the schemas
 * they are made of: generated from protocol/openrpc.json into
 * types.generated.ts (scripts/gen-protocol.mjs). This module adds only names
 * the document does not give.
 */
export * from "./types.generated.js";
import type { DiffStateResult, Event } from "./types.generated.js";

/** An AG-UI event in its wire shape (the document's Event). */
export type AguiEvent = Event;

/** What a call that changes a thread returns (diffState, diffToolState): `{version, delta, events}` (protocol/README.md §6). */
export type ChangeResult = DiffStateResult;
