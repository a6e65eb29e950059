import { defaultApplyEvents, type AbstractAgent, type HttpAgent } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";
import { vi } from "vitest";
import type { Json } from "../../src/core/index.js";

/**
 * Feeds events through @ag-ui/client's own defaultApplyEvents, exactly as the
 * browser does, and returns the state the client ends up holding. The library
 * swallows a failed patch with console.warn; here any warning is a failure.
 */
export async function clientApply(state: Json, events: readonly unknown[]): Promise<Json> {
  const warnings: unknown[][] = [];
  const warn = vi.spyOn(console, "warn").mockImplementation((...args: unknown[]) => {
    warnings.push(args);
  });
  try {
    const input = { threadId: "t", runId: "r", state, messages: [], tools: [], context: [], forwardedProps: {} };
    const agent = { messages: [], state } as unknown as AbstractAgent;
    const mutations = await lastValueFrom(
      defaultApplyEvents(input as never, from(events as never[]), agent, []).pipe(toArray()),
    );
    if (warnings.length) throw new Error(`@ag-ui/client dropped a delta: ${String(warnings[0]?.[0]).slice(0, 2000)}`);
    let out = state;
    for (const m of mutations) if (m.state !== undefined) out = m.state as Json;
    return out;
  } finally {
    warn.mockRestore();
  }
}

/**
 * Runs the agent once and returns what @ag-ui/client said while it ran: each
 * console.warn (a patch it dropped) and console.error (a subscriber that
 * failed), first argument only, prefixed with its level.
 */
export async function runCollecting(agent: HttpAgent, runId: string, forwardedProps?: Record<string, unknown>): Promise<string[]> {
  const said: string[] = [];
  const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void said.push(`warn: ${String(a[0])}`));
  const error = vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void said.push(`error: ${String(a[0])}`));
  try {
    await agent.runAgent({ runId, ...(forwardedProps ? { forwardedProps } : {}) });
  } finally {
    warn.mockRestore();
    error.mockRestore();
  }
  return said;
}
