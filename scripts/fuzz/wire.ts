import type { Framing } from "../harness/frames.js";
import type { Id } from "../harness/jsonrpc.js";

/**
 * Seeded generator of hostile message streams for the running sidecar;
 * scripts/fuzz.ts sends them and checks the invariants. A stream is a list of
 * frames in one framing, each with what it must provoke: the calls it carries
 * (ids unique across the stream), bounds on the `id: null` responses it costs,
 * and whether it is certain to arrive intact (LSP frames just after a
 * deliberately broken length may be swallowed: their ids may go unanswered,
 * never answered twice). Every choice is drawn from one fast-check `gen()`
 * seeded by the stream's seed, so a seed replays the same bytes.
 */

export type Expect = "ok" | "error" | "any";

export interface Call {
  id?: Id; // absent: a notification
  method: string;
  /** The params the server should see (JSON.parse semantics), even when the wire text spells them otherwise. */
  params: Record<string, unknown> | undefined;
  /** The tracked thread whose client-side replica follows this call's response. */
  thread?: string;
  expect: Expect;
  code?: number;
  reason?: string;
  frame: number;
}

export interface Frame {
  bytes: Buffer;
  calls: Call[];
  nulls: [number, number]; // bounds on the responses with id null
  certain: boolean;
  kind: string;
}

export interface StreamOptions {
  seed: number;
  messages: number;
  framing: Framing;
  forced: boolean; // pass --framing instead of letting auto mode detect it
  tight: boolean; // run under TIGHT limits
  huge: number; // huge or deeply nested messages per stream
}

export interface FuzzStream extends StreamOptions {
  args: string[];
  env: Record<string, string>;
  sigterm: number; // > 0: a signal after this fraction of the bytes, stdin left open
  signal: "SIGTERM" | "SIGINT";
  frames: Frame[];
  writes: number[]; // sizes of the writes the bytes go out in
  sent: Set<string>; // every id the bytes carry anywhere, as JSON text
  threads: string[]; // threads whose whole history is in the stream, sentinels included
  messages: number;
}

/** Tight limits: flags for two of them, environment variables for the others. */
export const TIGHT = { maxMessageBytes: 1 << 20, args: ["--max-message-bytes", "1MiB", "--max-ops", "64"], env: { AGUI_STATE_MAX_DEPTH: "16", AGUI_STATE_MAX_STATE_BYTES: "256KiB" } };

/** Wire text inserted verbatim (integers beyond 2^53, 1e400, 100k-deep nesting), and objects with repeated names. */
export class Raw {
  constructor(readonly text: string) {}
}
export class Dup {
  constructor(readonly entries: [string, unknown][]) {}
}

export function toText(v: unknown): string {
  if (v instanceof Raw) return v.text;
  const members = (es: [string, unknown][]): string => `{${es.map(([k, x]) => `${JSON.stringify(k)}:${toText(x)}`).join(",")}}`;
  if (v instanceof Dup) return members(v.entries);
  if (Array.isArray(v)) return `[${v.map(toText).join(",")}]`;
  return typeof v === "object" && v !== null ? members(Object.entries(v)) : JSON.stringify(v);
}

/** RFC 6901 as the contract defines it; undefined for an invalid pointer. */
export function parsePointerText(p: string): string[] | undefined {
  if (p === "") return [];
  const segs = p.slice(1).split("/");
  if (!p.startsWith("/") || segs.some((s) => /~([^01]|$)/.test(s))) return undefined;
  return segs.map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}
