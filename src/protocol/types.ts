/**
 * Params and results of every method of protocol version 1, as TypeScript
 * types. protocol/openrpc.json is the source of truth; test/protocol checks
 * that these types, the document and the examples agree.
 */
import type { Json, JsonObject, Skip, WireOp } from "../core/index.js";

/** A pointer string, or a Path of raw segments (protocol/README.md §3). */
export type PointerOrPath = string | (string | number)[];

export type AguiEvent = { type: "STATE_SNAPSHOT"; snapshot: Json } | { type: "STATE_DELTA"; delta: WireOp[] };

export interface Limits {
  maxMessageBytes: number;
  maxOps: number;
  maxDepth: number;
  maxStateBytes: number;
  maxThreads: number;
}

export interface OpenRunParams {
  threadId: string;
  runId?: string;
  state?: Json;
  namespace?: string;
  toolState?: JsonObject;
  snapshot?: boolean;
  ifVersion?: number;
}
export interface OpenRunResult {
  threadId: string;
  runId?: string;
  version: number;
  delta: WireOp[];
  events: AguiEvent[];
}

export interface DiffToolStateParams {
  threadId: string;
  toolState?: JsonObject;
  set?: JsonObject;
  remove?: string[];
  ifVersion?: number;
}
export interface ChangeResult {
  version: number;
  delta: WireOp[];
  events: AguiEvent[];
}

export interface ApplyOpsParams {
  threadId: string;
  ops: unknown[];
  atomic?: boolean;
  ifVersion?: number;
}
export interface ApplyOpsResult {
  version: number;
  delta: WireOp[];
  skipped: Skip[];
  events: AguiEvent[];
}

export interface NormalizeParams {
  ops: unknown[];
  state?: Json;
}
export interface NormalizeResult {
  delta: WireOp[];
  skipped: Skip[];
  state: Json;
}

export interface DiffStateParams {
  threadId: string;
  value: Json;
  path?: PointerOrPath;
  ifVersion?: number;
}

export interface GetStateParams {
  threadId: string;
  path?: PointerOrPath;
}
export interface GetStateResult {
  version: number;
  state: Json;
}

export interface CloseThreadParams {
  threadId: string;
}
export interface CloseThreadResult {
  closed: boolean;
}

export interface EscapePointerParams {
  path: (string | number)[];
}
export interface EscapePointerResult {
  pointer: string;
}

export interface ParsePointerParams {
  pointer: string;
}
export interface ParsePointerResult {
  path: string[];
}

export type StatsParams = Record<never, never>;
export interface StatsResult {
  threads: number;
  stateBytes: number;
  requests: number;
  uptimeMs: number;
  limits: Limits;
  version: string;
  /** Threads evicted by maxThreads since start. */
  evicted: number;
}
