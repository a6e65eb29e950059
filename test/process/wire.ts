import { expect } from "vitest";
import { parseFrames, type Framing } from "../../scripts/harness/frames.js";
import { request } from "../../scripts/harness/jsonrpc.js";
import { run, type Command } from "../../scripts/harness/process.js";

/**
 * Shared by the black-box tests of the built sidecar (protocol/README.md §2,
 * §7, §8): JSON-RPC 2.0 over stdin/stdout, both framings, shutdown, and
 * hostile input. Every one of them runs against the single executable and
 * against the node bundle (COMMANDS).
 */

export const FRAMINGS: readonly Framing[] = ["ndjson", "lsp"];

/**
 * An error response as it must appear on the wire; the message text is free.
 * Every error's data carries a string code (protocol/README.md §8), plus `data` if given.
 */
export const error = (id: string | number | null, code: number, data: Record<string, unknown> = {}): unknown => ({
  jsonrpc: "2.0",
  id,
  error: { code, message: expect.any(String), data: expect.objectContaining({ code: expect.any(String), ...data }) },
});
export const result = (id: string | number | null, value: unknown): unknown => ({ jsonrpc: "2.0", id, result: value });

export const escape = (id: number | string | null, segment: string): Record<string, unknown> => request(id, "escapePointer", { path: [segment] });
export const escaped = (id: number | string | null, segment: string): unknown => result(id, { pointer: "/" + segment.replaceAll("~", "~0").replaceAll("/", "~1") });

/** A tiny deterministic PRNG (mulberry32), so the junk is the same on every run. */
export function junk(seed: number, length: number): Buffer {
  let a = seed;
  const out = Buffer.alloc(length);
  for (let i = 0; i < length; i++) {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    out[i] = ((t ^ (t >>> 14)) >>> 0) & 0xff;
  }
  return out;
}

/** Sends `input` to a fresh process, ends stdin, asserts exit 0 and returns stdout parsed strictly as `framing`. */
export function exchanger(cmd: Command): (input: string | Buffer, framing?: Framing, args?: readonly string[]) => Promise<unknown[]> {
  return async (input, framing = "ndjson", args = []) => {
    const r = await run(cmd, args, input);
    expect(r, r.stderr).toMatchObject({ code: 0, signal: null });
    return parseFrames(framing, r.stdout);
  };
}

