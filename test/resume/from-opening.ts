import { expect } from "vitest";
import type { Relay } from "./relay.js";

interface Ended {
  state: unknown;
  messages: unknown;
}

/**
 * A run cut once, right after its opening block, and rejoined (protocol/README.md §16), as the proxy's
 * and each middleware's tests check it: one cut, two connections, one retry, from the opening id
 * (number 0); the upstream or app called once for the run (`calls`); and the client's end that of the
 * run never cut.
 */
export function expectRejoinedFromOpening(relay: Pick<Relay, "cutsMade" | "connections">, retries: readonly string[], calls: number, client: Ended, expected: Ended): void {
  expect(relay.cutsMade).toBe(1);
  expect(relay.connections).toBe(2);
  expect(retries).toHaveLength(1);
  expect(retries[0]).toMatch(/^[A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+$/);
  expect(calls).toBe(1);
  expect(client.state).toEqual(expected.state);
  expect(client.messages).toEqual(expected.messages);
}
