import { nodeCrypto } from "./node-crypto.js";

/**
 * Event ids and run handles (protocol/README.md §16). An id names one event of one run:
 * `<run>.<seq>.<nonce>`: the run's random handle (96 bits), the event's number in it (1-based) and
 * 96 more random bits. Number 0 names no event: it is the id of the answer's opening block, which
 * carries an id and no data (recorder.ts), so a client holds an id before the first event. The log keeps each event with its id, and a Last-Event-ID is taken only when
 * it equals, in full, the id the log holds at that run and number. So an id is unique within its
 * thread, opaque (a client only echoes it), and no id can be made from another: the next event's id
 * is not the last one's with the number raised. Drawing the nonces in bulk keeps the cost per event
 * to a slice of a string, not a hash.
 */
export interface EventId {
  run: string;
  seq: number;
}

const RUN = /^[A-Za-z0-9_-]{16}$/;
const SEQ = /^(?:0|[1-9][0-9]{0,14})$/;
const NONCE = /^[A-Za-z0-9_-]{16}$/;
const NONCE_BYTES = 12;
const POOL = NONCE_BYTES * 512;

/** A new run handle: 12 random bytes, base64url (16 characters). */
export const newRun = (): string => nodeCrypto().randomBytes(12).toString("base64url");

/** 16 base64url characters a nonce (12 bytes, a multiple of 3, so no padding and no partial character). */
const NONCE_CHARS = (NONCE_BYTES / 3) * 4;
// The pool is encoded once and sliced: encoding 12 bytes per event through Buffer#toString was a
// tenth of the proxy's whole work per event (docs/benchmarks.md, B19).
let pool = "";
let used = 0;

function nonce(): string {
  if (used + NONCE_CHARS > pool.length) {
    pool = nodeCrypto().randomBytes(POOL).toString("base64url");
    used = 0;
  }
  const out = pool.slice(used, used + NONCE_CHARS);
  used += NONCE_CHARS;
  return out;
}

export const mintId = (run: string, seq: number): string => `${run}.${seq}.${nonce()}`;

/** The run and number an id names, or undefined when it is not shaped as ours. Whether it is one the log holds is the log's to say. */
export function parseId(id: string): EventId | undefined {
  const parts = id.split(".");
  if (parts.length !== 3) return undefined;
  const [run, seq, n] = parts as [string, string, string];
  return RUN.test(run) && SEQ.test(seq) && NONCE.test(n) ? { run, seq: Number(seq) } : undefined;
}
