import { nodeCrypto } from "./node-crypto.js";

/**
 * Event ids and run handles (protocol/README.md §16). An id names one event of one run:
 * `<run>.<seq>.<nonce>`: the run's random handle (72 bits), the event's number in it (1-based) and 66
 * more random bits. The log keeps each event with its id, and a Last-Event-ID is taken only when it
 * equals, in full, the id the log holds at that run and number. So an id is unique within its thread,
 * opaque (a client only echoes it), and no id can be made from another: the next event's id is not
 * the last one's with the number raised. Drawing the nonces in bulk keeps the cost per event to a
 * slice of a string, not a hash. Number 0 names no event: it is the id of the answer's opening block,
 * which carries an id and no data (recorder.ts), so a client holds an id before the first event.
 *
 * Why these sizes: every event carries its id line, and on a stream of small events its bytes are a
 * large share of what goes over the wire, which the proxy pays for in its socket writes
 * (docs/benchmarks.md, "Figures behind choices in the source"). 66 random bits per event are past
 * the 64 that OWASP asks of a session token, and a guess must also come with the run's credentials;
 * 72 bits of handle keep runs apart within any retention.
 */
export interface EventId {
  run: string;
  seq: number;
}

const RUN_BYTES = 9;
const RUN = /^[A-Za-z0-9_-]{12}$/;
const SEQ = /^(?:0|[1-9][0-9]{0,14})$/;
/** 11 base64url characters, each 6 random bits: sliced from a pool of random bytes encoded whole. */
const NONCE_CHARS = 11;
const NONCE = /^[A-Za-z0-9_-]{11}$/;
/** Bytes drawn at a time: a multiple of 3, so every character of the pool is 6 random bits. */
const POOL_BYTES = 3 * 2048;

/** A new run handle: 9 random bytes, base64url (12 characters). */
export const newRun = (): string => nodeCrypto().randomBytes(RUN_BYTES).toString("base64url");

// The pool is encoded once and sliced: a slice costs far less than encoding the bytes again for each
// event through Buffer#toString, on the stream's path.
let pool = "";
let used = 0;

/**
 * Where the nonces' bits come from: AES-128 in counter mode over zeros, under a key and counter drawn
 * from the system's generator, drawn again every REKEY pools. That is NIST SP 800-90A's CTR_DRBG in
 * outline: nobody without the key can tell its output from random or work out one nonce from
 * others. Drawing every pool from the system's generator (randomBytes) costs a system call and its
 * copy per pool, on the stream's path; AES runs in the CPU's own instructions.
 */
const ZEROS = Buffer.alloc(POOL_BYTES);
const REKEY = 1024;
let drbg: { update(b: Buffer): Buffer } | undefined;
let pools = 0;

function draw(): Buffer {
  if (drbg === undefined || pools++ % REKEY === 0) {
    const c = nodeCrypto();
    drbg = c.createCipheriv("aes-128-ctr", c.randomBytes(16), c.randomBytes(16));
  }
  return drbg.update(ZEROS);
}

function nonce(): string {
  if (used + NONCE_CHARS > pool.length) {
    pool = draw().toString("base64url");
    used = 0;
  }
  const out = pool.slice(used, used + NONCE_CHARS);
  used += NONCE_CHARS;
  return out;
}

/** The id of a run's opening block (recorder.ts, protocol/README.md §16): number 0, with a nonce of its own. */
export const openingId = (run: string): string => `${run}.0.${nonce()}`;

/** Where a stamper gets each event's id line (stamp.ts). */
export interface IdLines {
  /** The next event's line: `id: <id>\n`. */
  next(): string;
}

/** The ids of one run's events, numbered from 1. */
export class RunIds implements IdLines {
  private readonly head: string;
  /** The number of the last id given. */
  seq = 0;

  constructor(readonly run: string) {
    this.head = `id: ${run}.`;
  }

  next(): string {
    return this.head + ++this.seq + "." + nonce() + "\n";
  }
}

/** The run and number an id names, or undefined when it is not shaped as ours. Whether it is one the log holds is the log's to say. */
export function parseId(id: string): EventId | undefined {
  const parts = id.split(".");
  if (parts.length !== 3) return undefined;
  const [run, seq, n] = parts as [string, string, string];
  return RUN.test(run) && SEQ.test(seq) && NONCE.test(n) ? { run, seq: Number(seq) } : undefined;
}
