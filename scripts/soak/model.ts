import { Rng } from "./rng.js";

/**
 * The soak's model of the sidecar's thread store: each thread's content as
 * the agent server keeps it (regenerated, not stored), its version, and the
 * store itself (LRU, eviction and close tombstones), with the exact size
 * `stats.stateBytes` must report.
 */

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/**
 * The size `stats.stateBytes` reports for a value, as documented
 * (protocol/README.md §7, and protocol/openrpc.json's stats example): compact
 * JSON (ASCII, nothing to escape here) plus one byte per member or element,
 * the separator each counts. Exact: a stats figure that differs by one byte
 * is a failure.
 */
export function size(v: Json): number {
  switch (typeof v) {
    case "string":
      return v.length + 2;
    case "number":
      return String(v).length;
    case "boolean":
      return v ? 4 : 5;
    default:
      break;
  }
  if (v === null) return 4;
  let n = 2;
  if (Array.isArray(v)) {
    n += v.length;
    for (const x of v) n += size(x);
  } else {
    for (const k of Object.keys(v)) n += k.length + 4 + size(v[k] as Json);
  }
  return n;
}

export const escapeToken = (k: string): string => k.replace(/~/g, "~0").replace(/\//g, "~1");

/** toolState keys written by diffToolState: some need RFC 6901 escaping. */
export const KEYS = ["dataset", "raster-ops/dataset", "raster-ops/bounds", "zoom", "tilde~key", "cursor", "filter", "a/b~c"] as const;
export const VALUES: readonly Json[] = ["era5", "gfs", "icon", 1, 2, 3, 0.5, [0, 0, 10, 10], [1, 1, 5, 5], { mode: "a" }, { mode: "b" }, null, true];
export const STATUSES = ["running", "idle", "done"] as const;
/** The agent server keeps its log short: it drops the oldest entries past this. */
export const LOG_CAP = 12;
export const WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"] as const;

export interface LogEntry {
  n: number;
  at: number;
  msg: string;
}

/**
 * A thread's document: 2 to 10 KB of JSON text, regenerated from (id, gen) so
 * the driver need not keep it. Written as text, with its size counted as it
 * is written: the driver makes one for every openRun.
 */
export interface Blob {
  text: string;
  size: number;
}

export function makeBlob(idx: number, gen: number): Blob {
  const r = new Rng((Math.imul(idx + 1, 0x9e3779b1) ^ Math.imul(gen + 1, 0x85ebca6b)) >>> 0);
  const target = 2048 + r.int(8192);
  let text = `{"title":"document ${idx}.${gen}","rows":[`;
  let containers = 1;
  let rows = 0;
  while (text.length + 2 < target) {
    const empty = r.chance(0.2);
    const tags = empty ? "[]" : `["${r.pick(WORDS)}","${r.pick(WORDS)}"]`;
    text += `${rows ? "," : ""}{"id":${rows},"name":"${r.pick(WORDS)}-${r.pick(WORDS)}","value":${r.int(1_000_000) / 1000},"tags":${tags}}`;
    containers += empty ? 1 : 2;
    rows++;
  }
  if (rows) containers++;
  text += "]}";
  return { text, size: text.length + containers };
}

export type Belief = "none" | "open" | "lost" | "closed";

/**
 * One thread id: what the agent server keeps for it (its stored map, its
 * client's state, what it believes of the sidecar) and, while the model holds
 * the thread, the mirror's content and version.
 */
export class Data {
  gen = -1;
  blob = 0;
  layer = 0;
  panel: "open" | "closed" = "open";
  keys = new Map<string, Json>();
  log: LogEntry[] | undefined;
  logSeq = 0;
  version = 0;
  belief: Belief = "none";
  /** The request number of the last openRun sent for it; -32001 answers to earlier calls are stale. */
  lastOpenSeq = 0;
  private bytesCache: number | undefined;

  constructor(
    readonly idx: number,
    readonly id: string,
  ) {}

  fresh(r: Rng): Blob {
    this.gen++;
    const b = makeBlob(this.idx, this.gen);
    this.blob = b.size;
    this.layer = r.int(100);
    this.panel = r.chance(0.5) ? "open" : "closed";
    this.keys = new Map();
    this.log = undefined;
    this.logSeq = 0;
    this.changed();
    return b;
  }

  changed(): void {
    this.bytesCache = undefined;
  }

  clientState(): Json {
    return { selectedLayer: `layer-${this.layer}`, ui: { panel: this.panel } };
  }

  /** The namespace map, with `doc` standing in for the blob. */
  toolState(doc: Json): { [k: string]: Json } {
    const m: { [k: string]: Json } = { doc };
    for (const [k, v] of this.keys) m[k] = v;
    if (this.log) m["log"] = this.log as unknown as Json;
    return m;
  }

  /** The namespace map as JSON text, the blob first. */
  toolStateText(blob: Blob): string {
    const rest = JSON.stringify(this.toolState(0)).slice('{"doc":0'.length);
    return `{"doc":${blob.text}${rest}`;
  }

  fullState(): Json {
    return { ...(this.clientState() as object), toolState: this.toolState(JSON.parse(makeBlob(this.idx, this.gen).text) as Json) };
  }

  /** What stats.stateBytes counts for this thread's mirror. */
  bytes(): number {
    // `"doc":0` stands for `"doc":<blob>`: one byte out, the blob in.
    this.bytesCache ??= size({ ...(this.clientState() as object), toolState: this.toolState(0) }) - 1 + this.blob;
    return this.bytesCache;
  }
}

/** The sidecar's thread store as protocol/README.md §7 describes it: LRU, plus remembered close/evict reasons. */
export class StoreModel {
  /** Live thread indexes, least recently used first. */
  readonly live = new Map<number, true>();
  private readonly tombs = new Map<number, "closed" | "evicted">();
  evictions = 0;
  created = 0;
  closed = 0;
  constructor(
    readonly maxThreads: number,
    /** Mirrors the store's default (src/store/thread-store.ts): max(1024, 4 × maxThreads). */
    readonly maxTombstones = Math.max(1024, maxThreads * 4),
  ) {}

  has(i: number): boolean {
    return this.live.has(i);
  }
  /** A call that names a live thread makes it the most recently used. */
  touch(i: number): boolean {
    if (!this.live.delete(i)) return false;
    this.live.set(i, true);
    return true;
  }
  reason(i: number): "never opened" | "closed" | "evicted" {
    return this.tombs.get(i) ?? "never opened";
  }
  /** Creates a thread; returns the indexes evicted to make room. */
  create(i: number): number[] {
    const out: number[] = [];
    while (this.live.size >= this.maxThreads) {
      const oldest = this.live.keys().next().value as number;
      this.live.delete(oldest);
      this.bury(oldest, "evicted");
      this.evictions++;
      out.push(oldest);
    }
    this.tombs.delete(i);
    this.live.set(i, true);
    this.created++;
    return out;
  }
  close(i: number): boolean {
    if (!this.live.delete(i)) return false;
    this.bury(i, "closed");
    this.closed++;
    return true;
  }
  private bury(i: number, why: "closed" | "evicted"): void {
    this.tombs.delete(i);
    this.tombs.set(i, why);
    if (this.tombs.size > this.maxTombstones) this.tombs.delete(this.tombs.keys().next().value as number);
  }
}
