import type { Message } from "@ag-ui/client";
import fastJsonPatch, { type Operation } from "fast-json-patch";
import type { Json, JsonObject } from "../../src/core/index.js";

/**
 * What a stream sent that the client must hold: its
 * text and tool-call argument deltas, and the state its snapshots and deltas
 * make; and what a client's messages hold of them. Pure, for the table, the
 * property test and scripts/lifecycle-share.ts alike.
 */

/** Every TEXT_MESSAGE_CONTENT delta of the case per messageId, and every TOOL_CALL_ARGS delta per toolCallId, each concatenated in order. */
export function sentDeltas(events: readonly JsonObject[]): { text: Map<string, string>; args: Map<string, string> } {
  const text = new Map<string, string>();
  const args = new Map<string, string>();
  for (const e of events) {
    if (e["type"] === "TEXT_MESSAGE_CONTENT") text.set(String(e["messageId"]), (text.get(String(e["messageId"])) ?? "") + String(e["delta"]));
    if (e["type"] === "TOOL_CALL_ARGS") args.set(String(e["toolCallId"]), (args.get(String(e["toolCallId"])) ?? "") + String(e["delta"]));
  }
  return { text, args };
}

/** The input state, then every STATE_SNAPSHOT (a replace) and STATE_DELTA (fast-json-patch, as the client applies it) in order. */
export function sentState(input: Json, events: readonly JsonObject[]): Json {
  let state = structuredClone(input);
  for (const e of events) {
    if (e["type"] === "STATE_SNAPSHOT") state = structuredClone(e["snapshot"] as Json);
    if (e["type"] === "STATE_DELTA") state = fastJsonPatch.applyPatch(state, structuredClone(e["delta"]) as unknown as Operation[], true, false).newDocument;
  }
  return state;
}

/** What the agent holds: each text message's content by id, each tool call's arguments by id. */
export function heldDeltas(messages: readonly Message[]): { text: Map<string, string>; args: Map<string, string> } {
  const text = new Map<string, string>();
  const args = new Map<string, string>();
  for (const m of messages) {
    if (typeof m.content === "string" && !text.has(m.id)) text.set(m.id, m.content);
    if (m.role === "assistant") for (const t of m.toolCalls ?? []) if (!args.has(t.id)) args.set(t.id, t.function.arguments);
  }
  return { text, args };
}

