import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The soak: a long, realistic, replayable stream of requests against the real
 * sidecar, with every answer predicted before its request is sent.
 *
 * The sidecar handles the frames of its one input stream in order, so the
 * order in which requests are written is the order in which they act on its
 * thread store. The driver keeps an exact model of that store (an LRU of
 * --max-threads threads, the eviction and close tombstones, each thread's
 * version and content) and updates it as it writes each request; every
 * response is then checked against the outcome the model predicted: result or
 * error, version, delta, skipped ops, the unknown-thread reason, and on every
 * `stats` the live thread count, the eviction count, the request count and the
 * state bytes.
 *
 * The simulated agent server does not read the model to decide what to send:
 * it believes a thread is open until a call says otherwise (-32001), and then
 * reopens it with `openRun` and its stored map, the recovery the README
 * documents. So unknown-thread errors occur as they would in production.
 */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const BINARY = path.join(ROOT, "dist/agui-state");

export interface SoakOptions {
  /** Total requests, every stats and recovery call included. */
  requests: number;
  /** Distinct thread ids the requests are drawn from. */
  ids: number;
  maxThreads: number;
  seed: number;
  /** Requests kept in flight. */
  window?: number;
  /** A stats call every this many requests (its answer is checked against the model). */
  statsEvery?: number;
  /** An RSS sample (with a stats call) every this many requests. */
  sampleEvery?: number;
  /** Allowed RSS growth from the first sample after the plateau to the end, as a fraction. */
  tolerance?: number;
  /** How many of the last samples may not rise strictly in a row (with a rise over `trendFloor`). */
  trendSamples?: number;
  /** Total rise across the last `trendSamples` samples that counts as growth, as a fraction. */
  trendFloor?: number;
  /**
   * The plateau starts once the store is full and has turned over this many
   * times (evictions >= warmupTurnovers x maxThreads): by then every live
   * thread was opened under steady-state traffic, and V8 has sized its heap
   * for the steady-state live set. 0: as soon as the store is full.
   */
  warmupTurnovers?: number;
  /** NODE_OPTIONS for the sidecar (for example a V8 heap cap); none by default. */
  nodeOptions?: string;
  binary?: string;
  /** Fails the run when no response arrives for this long. */
  stallMs?: number;
  /** Called with each curve row as it is sampled. */
  onSample?: (s: Sample) => void;
}

export interface Sample {
  requests: number;
  rssKiB: number;
  threads: number;
  stateBytes: number;
  evicted: number;
  elapsedMs: number;
}

export interface SoakReport {
  options: Required<Omit<SoakOptions, "onSample">>;
  sent: number;
  responses: number;
  curve: Sample[];
  /** Request number at which the model's live thread count first reached --max-threads. */
  fullAt: number | undefined;
  /** Request number from which the plateau is checked: full, and turned over warmupTurnovers times. */
  plateauAt: number | undefined;
  /** The first sample after fullAt, and the growth from it to the end (V8's heap warm-up included; reported, not checked). */
  fullSample: Sample | undefined;
  fullGrowth: number | undefined;
  baseline: Sample | undefined;
  /** (last RSS - baseline RSS) / baseline RSS. */
  growth: number | undefined;
  /** Least-squares slope of RSS over the samples after the plateau, as a fraction of the baseline per 100,000 requests. */
  slopePer100k: number | undefined;
  peakRssKiB: number;
  durationMs: number;
  evictions: number;
  created: number;
  closed: number;
  live: number;
  errors: Record<string, number>;
  methods: Record<string, number>;
  /** stats calls answered, and how many of them counted stateBytes with integer widths rounded (see `size`). */
  statsCalls: number;
  stateBytesRounded: number;
  stderrWarnings: number;
  /** Node's own warnings on stderr (a V8 flag in NODE_OPTIONS makes the binary reject its code cache and say so). */
  nodeWarnings: number;
  exitCode: number | null;
  failures: string[];
}

// ---------------------------------------------------------------- PRNG

/** mulberry32: small, fast, and good enough to draw a workload from. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

// ---------------------------------------------------------------- JSON helpers

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, k)) return false;
    if (!jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  }
  return true;
}

/**
 * The size `stats.stateBytes` reports for a value, two ways.
 * - `doc`: as documented (protocol/openrpc.json, stats example 02): compact
 *   JSON (ASCII, nothing to escape here) plus one byte per non-empty object
 *   or array, since every member and element counts a separator.
 * - `rounded`: the same, but integers from 1,000 to 999,999 count 6 digits and
 *   those from 1,000,000 to 999,999,999 count 9, as src/core/measure.ts
 *   numberBytes counts them (it skips the string conversion). That rounding is
 *   not in the documentation; a stats figure matching either is accepted.
 */
interface Size {
  doc: number;
  rounded: number;
}

function size(v: Json, into: Size = { doc: 0, rounded: 0 }): Size {
  switch (typeof v) {
    case "string":
      into.doc += v.length + 2;
      into.rounded += v.length + 2;
      return into;
    case "number": {
      const exact = String(v).length;
      into.doc += exact;
      into.rounded += Number.isInteger(v) && v >= 1000 && v < 1e9 ? (v < 1e6 ? 6 : 9) : exact;
      return into;
    }
    case "boolean":
      into.doc += v ? 4 : 5;
      into.rounded += v ? 4 : 5;
      return into;
    default:
      break;
  }
  if (v === null) {
    into.doc += 4;
    into.rounded += 4;
    return into;
  }
  let over = 2;
  if (Array.isArray(v)) {
    over += v.length;
    for (const x of v) size(x, into);
  } else {
    for (const k of Object.keys(v)) {
      over += k.length + 4;
      size(v[k] as Json, into);
    }
  }
  into.doc += over;
  into.rounded += over;
  return into;
}

const escapeToken = (k: string): string => k.replace(/~/g, "~0").replace(/\//g, "~1");

// ---------------------------------------------------------------- the workload

/** toolState keys written by diffToolState: some need RFC 6901 escaping. */
const KEYS = ["dataset", "raster-ops/dataset", "raster-ops/bounds", "zoom", "tilde~key", "cursor", "filter", "a/b~c"] as const;
const VALUES: readonly Json[] = ["era5", "gfs", "icon", 1, 2, 3, 0.5, [0, 0, 10, 10], [1, 1, 5, 5], { mode: "a" }, { mode: "b" }, null, true];
const STATUSES = ["running", "idle", "done"] as const;
/** The agent server keeps its log short: it drops the oldest entries past this. */
const LOG_CAP = 12;
const WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"] as const;

interface LogEntry {
  n: number;
  at: number;
  msg: string;
}

/**
 * A thread's document: 2 to 10 KB of JSON text, regenerated from (id, gen) so
 * the driver need not keep it. Written as text, with its size counted as it
 * is written: the driver makes one for every openRun.
 */
interface Blob {
  text: string;
  size: Size;
}

function makeBlob(idx: number, gen: number): Blob {
  const r = new Rng((Math.imul(idx + 1, 0x9e3779b1) ^ Math.imul(gen + 1, 0x85ebca6b)) >>> 0);
  const target = 2048 + r.int(8192);
  let text = `{"title":"document ${idx}.${gen}","rows":[`;
  let containers = 1;
  let rows = 0;
  while (text.length + 2 < target) {
    const empty = r.chance(0.2);
    const tags = empty ? "[]" : `["${r.pick(WORDS)}","${r.pick(WORDS)}"]`;
    // Every integer here is below 1,000 (ids, and values are thousandths below 1,000): both measures agree.
    text += `${rows ? "," : ""}{"id":${rows},"name":"${r.pick(WORDS)}-${r.pick(WORDS)}","value":${r.int(1_000_000) / 1000},"tags":${tags}}`;
    containers += empty ? 1 : 2;
    rows++;
  }
  if (rows) containers++;
  text += "]}";
  return { text, size: { doc: text.length + containers, rounded: text.length + containers } };
}

type Belief = "none" | "open" | "lost" | "closed";

/**
 * One thread id: what the agent server keeps for it (its stored map, its
 * client's state, what it believes of the sidecar) and, while the model holds
 * the thread, the mirror's content and version.
 */
class Data {
  gen = -1;
  blob: Size = { doc: 0, rounded: 0 };
  layer = 0;
  panel: "open" | "closed" = "open";
  keys = new Map<string, Json>();
  log: LogEntry[] | undefined;
  logSeq = 0;
  version = 0;
  belief: Belief = "none";
  /** The request number of the last openRun sent for it; -32001 answers to earlier calls are stale. */
  lastOpenSeq = 0;
  private bytesCache: Size | undefined;

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
  bytes(): Size {
    if (this.bytesCache === undefined) {
      // `"doc":0` stands for `"doc":<blob>`: one byte out, the blob in.
      const s = size({ ...(this.clientState() as object), toolState: this.toolState(0) });
      this.bytesCache = { doc: s.doc - 1 + this.blob.doc, rounded: s.rounded - 1 + this.blob.rounded };
    }
    return this.bytesCache;
  }
}

/** The sidecar's thread store as protocol/README.md §7 describes it: LRU, plus remembered close/evict reasons. */
class StoreModel {
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

interface RpcError {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

/** What the model says the answer to one request must be. */
interface Pending {
  seq: number;
  method: string;
  idx: number;
  /** Checks a result; returns what is wrong, or undefined. */
  ok?: (result: Record<string, unknown>) => string | undefined;
  /** The expected error: its code and the members of data that must match. */
  err?: { code: number; data: Record<string, unknown> };
  sample?: boolean;
  label: string;
}

function deltaCheck(expected: Json[], version: number, extra?: (r: Record<string, unknown>) => string | undefined): (r: Record<string, unknown>) => string | undefined {
  const text = JSON.stringify(expected);
  return (r) => {
    if (r["version"] !== version) return `version ${String(r["version"])}, model says ${version}`;
    const delta = r["delta"];
    if (JSON.stringify(delta) !== text && !jsonEqual(delta, expected)) return `delta ${JSON.stringify(delta).slice(0, 300)}, model says ${text.slice(0, 300)}`;
    const events = r["events"];
    const want = expected.length ? [{ type: "STATE_DELTA", delta: expected }] : [];
    if (!jsonEqual(events, want)) return `events ${JSON.stringify(events).slice(0, 300)}, model says ${JSON.stringify(want).slice(0, 300)}`;
    return extra?.(r);
  };
}

/**
 * Draws the requests and predicts their answers. `next(seq)` returns the
 * request line for request number `seq` and updates the model as the sidecar
 * will when it handles that line.
 */
class Workload {
  readonly r: Rng;
  readonly store: StoreModel;
  readonly data: Data[] = [];
  private readonly recover: number[] = [];
  private readonly hot: number;
  /** Request number at which the model's live count first reached maxThreads. */
  fullAt: number | undefined;
  /** Request number at which it was full and had evicted warmupTurnovers x maxThreads. */
  plateauAt: number | undefined;
  readonly methods: Record<string, number> = {};
  /** stats calls whose stateBytes matched the rounded figure, not the documented one. */
  roundedStats = 0;
  /** -32001 answers, applied to the agent server's beliefs only once the request `window` later is drawn (replayable). */
  private readonly heard: { seq: number; idx: number; reason: string }[] = [];

  constructor(
    readonly opts: Required<Omit<SoakOptions, "onSample">>,
  ) {
    this.r = new Rng(opts.seed);
    this.store = new StoreModel(opts.maxThreads);
    this.hot = Math.max(1, Math.round(opts.ids * 0.1));
  }

  private get(i: number): Data {
    let d = this.data[i];
    if (!d) this.data[i] = d = new Data(i, `soak-${i}`);
    return d;
  }

  /** 75% of calls go to the hottest 10% of ids, the rest anywhere: the cold ones churn through the LRU. */
  private pickIdx(): number {
    return this.r.chance(0.75) ? this.r.int(this.hot) : this.r.int(this.opts.ids);
  }

  /**
   * A -32001 answer came back: the agent server learns the thread is gone and
   * reopens it. What it learns from request s counts from request s + window
   * on, whenever the answer arrived, so a seed replays the same requests.
   */
  lost(p: Pending, reason: string): void {
    this.heard.push({ seq: p.seq, idx: p.idx, reason });
  }

  private learn(seq: number): void {
    while (this.heard.length && (this.heard[0] as { seq: number }).seq <= seq - this.opts.window) {
      const h = this.heard.shift() as { seq: number; idx: number; reason: string };
      const d = this.get(h.idx);
      if (h.seq < d.lastOpenSeq) continue; // reopened since this call was sent
      if (d.belief === "open") d.belief = h.reason === "evicted" ? "lost" : h.reason === "closed" ? "closed" : "none";
      this.recover.push(h.idx);
    }
  }

  liveBytes(): Size {
    const n: Size = { doc: 0, rounded: 0 };
    for (const i of this.store.live.keys()) {
      const b = this.get(i).bytes();
      n.doc += b.doc;
      n.rounded += b.rounded;
    }
    return n;
  }

  next(seq: number, sample: boolean): { line: string; p: Pending } {
    this.learn(seq);
    const out = this.draw(seq, sample);
    this.methods[out.p.label] = (this.methods[out.p.label] ?? 0) + 1;
    if (this.plateauAt === undefined && this.store.live.size >= this.opts.maxThreads) {
      this.fullAt ??= seq;
      if (this.store.evictions >= this.opts.warmupTurnovers * this.opts.maxThreads) this.plateauAt = seq;
    }
    return out;
  }

  private draw(seq: number, sample: boolean): { line: string; p: Pending } {
    if (sample || seq % this.opts.statsEvery === 0) return this.stats(seq, sample);
    while (this.recover.length) {
      const i = this.recover.shift() as number;
      if (this.get(i).belief !== "open") return this.openRun(seq, i, "recover");
    }
    const i = this.pickIdx();
    const d = this.get(i);
    if (d.belief !== "open") {
      // Mostly the agent server opens a thread it does not hold; sometimes it
      // calls first and learns from the -32001 (then reopens).
      if (!this.r.chance(0.15)) return this.openRun(seq, i, d.belief === "none" ? "open-new" : "reopen");
    }
    const w = this.r.int(1000);
    if (w < 440) return this.diffToolState(seq, i);
    if (w < 720) return this.applyOps(seq, i, undefined);
    if (w < 900) return this.getState(seq, i);
    if (w < 940) return this.openRun(seq, i, "rerun");
    if (w < 960) return this.closeThread(seq, i);
    if (w < 970) return this.badOpenRun(seq, i, "root");
    if (w < 980) return this.badOpenRun(seq, i, "version");
    if (w < 990) return this.applyOps(seq, i, "stale");
    return this.applyOps(seq, i, "current");
  }

  private line(seq: number, method: string, params: string): string {
    return `{"jsonrpc":"2.0","id":${seq},"method":"${method}","params":${params}}\n`;
  }

  /** The error a call naming a thread the model does not hold gets (and the model is untouched). */
  private unknown(seq: number, d: Data, method: string, label: string): Pending {
    return { seq, method, idx: d.idx, label, err: { code: -32001, data: { code: "UNKNOWN_THREAD", threadId: d.id, reason: this.store.reason(d.idx) } } };
  }

  private stats(seq: number, sample: boolean): { line: string; p: Pending } {
    const threads = this.store.live.size;
    const evicted = this.store.evictions;
    const bytes = this.liveBytes();
    const max = this.opts.maxThreads;
    const ok = (r: Record<string, unknown>): string | undefined => {
      const bad: string[] = [];
      if (r["threads"] !== threads) bad.push(`threads ${String(r["threads"])}, model says ${threads}`);
      if (r["evicted"] !== evicted) bad.push(`evicted ${String(r["evicted"])}, model says ${evicted}`);
      if (r["requests"] !== seq) bad.push(`requests ${String(r["requests"])}, ${seq} sent`);
      if (r["stateBytes"] !== bytes.doc && r["stateBytes"] !== bytes.rounded) bad.push(`stateBytes ${String(r["stateBytes"])}, model says ${bytes.doc} (${bytes.rounded} with integer widths rounded)`);
      else if (r["stateBytes"] !== bytes.doc) this.roundedStats++;
      if ((r["limits"] as Record<string, unknown> | undefined)?.["maxThreads"] !== max) bad.push(`limits.maxThreads ${JSON.stringify(r["limits"])}`);
      return bad.length ? bad.join("; ") : undefined;
    };
    return { line: this.line(seq, "stats", "{}"), p: { seq, method: "stats", idx: -1, label: "stats", ok, sample } };
  }

  private openRun(seq: number, i: number, label: string): { line: string; p: Pending } {
    const d = this.get(i);
    const live = this.store.has(i);
    let changed: boolean;
    let blob: Blob | undefined;
    if (label === "rerun" && live) {
      // A new run on a thread both sides hold: the same map, the client's layer may have moved.
      const before = d.layer;
      if (this.r.chance(0.5)) d.layer = this.r.int(100);
      changed = d.layer !== before;
    } else if (d.gen >= 0 && (d.belief === "lost" || d.belief === "open")) {
      // Recovery (the sidecar lost the thread, or may have): the stored map goes back as it was.
      changed = !live;
    } else {
      // A new conversation: never opened, or closed by the agent server.
      blob = d.fresh(this.r);
      changed = true;
    }
    if (live) this.store.touch(i);
    else this.store.create(i);
    if (changed) d.version = live ? d.version + 1 : 1;
    d.changed();
    d.belief = "open";
    d.lastOpenSeq = seq;
    const ts = d.toolStateText(blob ?? makeBlob(i, d.gen));
    const version = d.version;
    const ok = (r: Record<string, unknown>): string | undefined => {
      if (r["threadId"] !== d.id) return `threadId ${String(r["threadId"])}`;
      if (r["version"] !== version) return `version ${String(r["version"])}, model says ${version}`;
      const delta = r["delta"] as { op?: string; path?: string; value?: unknown }[];
      if (!Array.isArray(delta) || delta.length !== 1 || delta[0]?.op !== "add" || delta[0].path !== "/toolState") return `delta is not one add of /toolState: ${JSON.stringify(delta).slice(0, 200)}`;
      if (JSON.stringify(delta[0].value) !== ts && !jsonEqual(delta[0].value, JSON.parse(ts))) return `the namespace add does not carry the map sent`;
      if (!jsonEqual(r["events"], [{ type: "STATE_DELTA", delta }])) return `events ${JSON.stringify(r["events"]).slice(0, 200)}`;
      return undefined;
    };
    const params = `{"threadId":${JSON.stringify(d.id)},"runId":"run-${seq}","state":${JSON.stringify(d.clientState())},"toolState":${ts}}`;
    return { line: this.line(seq, "openRun", params), p: { seq, method: "openRun", idx: i, label: `openRun ${label}`, ok } };
  }

  /** openRun calls that must fail: they touch a live thread but create none. */
  private badOpenRun(seq: number, i: number, kind: "root" | "version"): { line: string; p: Pending } {
    const d = this.get(i);
    const live = this.store.touch(i);
    const id = JSON.stringify(d.id);
    if (kind === "root") {
      const params = `{"threadId":${id},"state":["not","an","object"],"toolState":{"k":1}}`;
      return { line: this.line(seq, "openRun", params), p: { seq, method: "openRun", idx: i, label: "openRun bad state", err: { code: -32602, data: { code: "INVALID_PARAMS", field: "/state", reason: "ROOT_NOT_OBJECT" } } } };
    }
    const params = `{"threadId":${id},"ifVersion":999999,"toolState":{"k":1}}`;
    const actual = live ? d.version : 0;
    return { line: this.line(seq, "openRun", params), p: { seq, method: "openRun", idx: i, label: "openRun stale ifVersion", err: { code: -32004, data: { code: "VERSION_CONFLICT", expected: 999999, actual } } } };
  }

  private closeThread(seq: number, i: number): { line: string; p: Pending } {
    const d = this.get(i);
    const closed = this.store.close(i);
    d.belief = "closed";
    const ok = (r: Record<string, unknown>): string | undefined => (r["closed"] === closed ? undefined : `closed ${String(r["closed"])}, model says ${closed}`);
    return { line: this.line(seq, "closeThread", `{"threadId":${JSON.stringify(d.id)}}`), p: { seq, method: "closeThread", idx: i, label: "closeThread", ok } };
  }

  private diffToolState(seq: number, i: number): { line: string; p: Pending } {
    const d = this.get(i);
    const set: { [k: string]: Json } = {};
    const n = 1 + this.r.int(3);
    for (let k = 0; k < n; k++) set[this.r.pick(KEYS)] = this.r.pick(VALUES);
    const remove: string[] = [];
    if (this.r.chance(0.15)) {
      const k = this.r.pick(KEYS);
      if (!(k in set)) remove.push(k);
    }
    const params = `{"threadId":${JSON.stringify(d.id)},"set":${JSON.stringify(set)}${remove.length ? `,"remove":${JSON.stringify(remove)}` : ""}}`;
    const line = this.line(seq, "diffToolState", params);
    if (!this.store.touch(i)) return { line, p: this.unknown(seq, d, "diffToolState", "diffToolState") };
    const names = new Set<string>();
    for (const [k, v] of Object.entries(set)) if (!d.keys.has(k) || !jsonEqual(d.keys.get(k), v)) names.add(k);
    for (const k of remove) if (d.keys.has(k)) names.add(k);
    const delta: Json[] = [];
    for (const k of [...names].sort()) {
      const path = `/toolState/${escapeToken(k)}`;
      if (k in set) {
        delta.push({ op: "add", path, value: set[k] as Json });
        d.keys.set(k, set[k] as Json);
      } else {
        delta.push({ op: "remove", path });
        d.keys.delete(k);
      }
    }
    if (delta.length) {
      d.version++;
      d.changed();
    }
    return { line, p: { seq, method: "diffToolState", idx: i, label: "diffToolState", ok: deltaCheck(delta, d.version) } };
  }

  private applyOps(seq: number, i: number, ifVersion: "stale" | "current" | undefined): { line: string; p: Pending } {
    const d = this.get(i);
    const live = this.store.has(i);
    const ops: Json[] = [];
    const delta: Json[] = [];
    const skipped: { index: number; code: string }[] = [];
    // Work on a copy; it becomes the model only if the call is predicted to apply.
    let log = d.log ? [...d.log] : undefined;
    let logSeq = d.logSeq;
    const keys = new Map(d.keys);
    const appends = 1 + this.r.int(3);
    for (let k = 0; k < appends; k++) {
      const entry: LogEntry = { n: ++logSeq, at: seq, msg: `${this.r.pick(WORDS)} ${logSeq}` };
      ops.push({ op: "add", path: "/toolState/log/-", value: entry as unknown as Json });
      if (!log) {
        log = [];
        delta.push({ op: "add", path: "/toolState/log", value: [] });
      }
      log.push(entry);
      delta.push({ op: "add", path: "/toolState/log/-", value: entry as unknown as Json });
    }
    while (log && log.length > LOG_CAP) {
      ops.push({ op: "remove", path: "/toolState/log/0" });
      delta.push({ op: "remove", path: "/toolState/log/0" });
      log.shift();
    }
    if (this.r.chance(0.3)) {
      // A replace of a member that may be missing: it becomes an add (protocol/README.md §5 rule 3).
      const value = this.r.pick(STATUSES);
      ops.push({ op: "replace", path: "/toolState/status", value });
      delta.push({ op: keys.has("status") ? "replace" : "add", path: "/toolState/status", value });
      keys.set("status", value);
    }
    if (this.r.chance(0.1)) {
      // A Path (unescaped segments) naming a key that needs escaping.
      const k = this.r.pick(KEYS);
      const value = this.r.pick(VALUES);
      ops.push({ op: "replace", path: ["toolState", k], value });
      delta.push({ op: keys.has(k) ? "replace" : "add", path: `/toolState/${escapeToken(k)}`, value });
      keys.set(k, value);
    }
    if (this.r.chance(0.05)) {
      // An op that does not fit: skipped and reported, the rest still applies.
      skipped.push({ index: ops.length, code: "PATH_NOT_FOUND" });
      ops.push({ op: "remove", path: "/toolState/gone" });
    }
    const version = ifVersion === "stale" ? d.version + 7 : ifVersion === "current" ? d.version : undefined;
    const params = `{"threadId":${JSON.stringify(d.id)},"ops":${JSON.stringify(ops)}${version !== undefined && (live || ifVersion === "stale") ? `,"ifVersion":${version}` : ""}}`;
    const label = ifVersion ? `applyOps ifVersion ${ifVersion}` : "applyOps";
    const line = this.line(seq, "applyOps", params);
    if (!this.store.touch(i)) return { line, p: this.unknown(seq, d, "applyOps", label) };
    if (ifVersion === "stale") return { line, p: { seq, method: "applyOps", idx: i, label, err: { code: -32004, data: { code: "VERSION_CONFLICT", expected: version, actual: d.version } } } };
    d.log = log;
    d.logSeq = logSeq;
    d.keys = keys;
    d.version++;
    d.changed();
    const extra = (r: Record<string, unknown>): string | undefined => {
      const s = r["skipped"] as { index?: number; code?: string }[];
      if (!Array.isArray(s) || s.length !== skipped.length || s.some((x, k) => x.index !== skipped[k]?.index || x.code !== skipped[k]?.code)) return `skipped ${JSON.stringify(s).slice(0, 300)}, model says ${JSON.stringify(skipped)}`;
      return undefined;
    };
    return { line, p: { seq, method: "applyOps", idx: i, label, ok: deltaCheck(delta, d.version, extra) } };
  }

  private getState(seq: number, i: number): { line: string; p: Pending } {
    const d = this.get(i);
    const w = this.r.int(100);
    const id = JSON.stringify(d.id);
    if (w < 5) {
      // Not a pointer: refused with the params, before the thread is looked up (no touch).
      const line = this.line(seq, "getState", `{"threadId":${id},"path":"toolState/log"}`);
      return { line, p: { seq, method: "getState", idx: i, label: "getState bad pointer", err: { code: -32602, data: { code: "INVALID_PARAMS", field: "/path", reason: "INVALID_POINTER" } } } };
    }
    const key = w < 10 ? "" : w < 45 ? "log" : this.r.pick(KEYS);
    const path = key === "" ? "" : `/toolState/${escapeToken(key)}`;
    const line = this.line(seq, "getState", `{"threadId":${id},"path":${JSON.stringify(path)}}`);
    const label = key === "" ? "getState root" : "getState member";
    if (!this.store.touch(i)) return { line, p: this.unknown(seq, d, "getState", label) };
    const version = d.version;
    let want: Json | undefined;
    if (key === "") want = d.fullState();
    else if (key === "log") want = d.log ? ([...d.log] as unknown as Json) : undefined;
    else want = d.keys.get(key);
    if (want === undefined) return { line, p: { seq, method: "getState", idx: i, label: "getState missing member", err: { code: -32602, data: { code: "INVALID_PARAMS", field: "/path", reason: "PATH_NOT_FOUND" } } } };
    const ok = (r: Record<string, unknown>): string | undefined => {
      if (r["version"] !== version) return `version ${String(r["version"])}, model says ${version}`;
      if (!jsonEqual(r["state"], want)) return `state ${JSON.stringify(r["state"]).slice(0, 300)}, model says ${JSON.stringify(want).slice(0, 300)}`;
      return undefined;
    };
    return { line, p: { seq, method: "getState", idx: i, label, ok } };
  }
}

// ---------------------------------------------------------------- the run

/** The caller's env without NODE_OPTIONS (tsx and vitest put loader hooks there) or AGUI_STATE_* settings. */
function childEnv(nodeOptions: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (k !== "NODE_OPTIONS" && !k.startsWith("AGUI_STATE_")) env[k] = v;
  if (nodeOptions) env["NODE_OPTIONS"] = nodeOptions;
  return env;
}

/** What Node itself prints when a V8 flag makes the single executable reject its code cache. */
const NODE_WARNING = /^\(node:\d+\) Warning: Code cache data rejected\.$|^\(Use `.* --trace-warnings \.\.\.` to show where the warning was created\)$/;

function readStatus(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? NaN);
}

export function defaults(o: SoakOptions): Required<Omit<SoakOptions, "onSample">> {
  return {
    requests: o.requests,
    ids: o.ids,
    maxThreads: o.maxThreads,
    seed: o.seed >>> 0,
    window: o.window ?? 32,
    statsEvery: o.statsEvery ?? 1000,
    sampleEvery: o.sampleEvery ?? 100_000,
    tolerance: o.tolerance ?? 0.15,
    trendSamples: o.trendSamples ?? 5,
    trendFloor: o.trendFloor ?? 0.03,
    warmupTurnovers: o.warmupTurnovers ?? 2,
    nodeOptions: o.nodeOptions ?? "",
    binary: o.binary ?? BINARY,
    stallMs: o.stallMs ?? 20_000,
  };
}

const MAX_DETAILS = 20;

/** Runs one soak against a fresh sidecar. Never throws for a failed check: failures are in the report. */
export async function runSoak(input: SoakOptions): Promise<SoakReport> {
  const opts = defaults(input);
  const w = new Workload(opts);
  const failures: string[] = [];
  let mismatches = 0;
  const fail = (s: string): void => {
    mismatches++;
    if (failures.length < MAX_DETAILS) failures.push(s);
    else if (failures.length === MAX_DETAILS) failures.push("… further failures not listed");
  };
  const errors: Record<string, number> = {};
  const curve: Sample[] = [];
  const pending = new Map<number, Pending>();
  let sent = 0;
  let responses = 0;
  let stderrTail = "";
  let stderrWarnings = 0;
  let nodeWarnings = 0;
  let stderrBuf = "";

  const child: ChildProcessWithoutNullStreams = spawn(opts.binary, ["--max-threads", String(opts.maxThreads)], { env: childEnv(opts.nodeOptions), stdio: ["pipe", "pipe", "pipe"] });
  const pid = child.pid as number;
  child.stdin.on("error", () => undefined);
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (s: string) => {
    stderrTail = (stderrTail + s).slice(-8192);
    stderrBuf += s;
    let nl: number;
    while ((nl = stderrBuf.indexOf("\n")) !== -1) {
      const l = stderrBuf.slice(0, nl);
      stderrBuf = stderrBuf.slice(nl + 1);
      try {
        const rec = JSON.parse(l) as { level?: number };
        if ((rec.level ?? 0) >= 40) stderrWarnings++;
      } catch {
        if (opts.nodeOptions && NODE_WARNING.test(l)) nodeWarnings++;
        else stderrWarnings++;
      }
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  let exitedEarly = false;

  const t0 = performance.now();
  let lastProgress = t0;
  let peakSeen = 0;

  const handle = (p: Pending, msg: Record<string, unknown>): void => {
    const where = `request ${p.seq} (${p.label}${p.idx >= 0 ? ` on soak-${p.idx}` : ""})`;
    if ("error" in msg) {
      const e = msg["error"] as RpcError;
      const reason = e.data?.["reason"];
      const key = `${e.code}${typeof reason === "string" ? ` ${reason}` : ""}`;
      errors[key] = (errors[key] ?? 0) + 1;
      if (!p.err) return fail(`${where}: error ${JSON.stringify(e).slice(0, 300)}, model expects a result`);
      if (e.code !== p.err.code) return fail(`${where}: error code ${e.code}, model expects ${p.err.code}: ${JSON.stringify(e).slice(0, 300)}`);
      for (const [k, v] of Object.entries(p.err.data)) {
        if (!jsonEqual(e.data?.[k], v)) return fail(`${where}: error data.${k} ${JSON.stringify(e.data?.[k])}, model says ${JSON.stringify(v)}`);
      }
      if (e.code === -32001) w.lost(p, String(reason));
      return;
    }
    if (!("result" in msg)) return fail(`${where}: neither result nor error: ${JSON.stringify(msg).slice(0, 300)}`);
    if (p.err) return fail(`${where}: a result, model expects error ${JSON.stringify(p.err)}: ${JSON.stringify(msg["result"]).slice(0, 300)}`);
    const result = msg["result"] as Record<string, unknown>;
    const bad = p.ok?.(result);
    if (bad) fail(`${where}: ${bad}`);
    if (p.sample) {
      const rssKiB = readStatus(pid, "VmRSS");
      const s: Sample = { requests: p.seq, rssKiB, threads: result["threads"] as number, stateBytes: result["stateBytes"] as number, evicted: result["evicted"] as number, elapsedMs: performance.now() - t0 };
      curve.push(s);
      input.onSample?.(s);
    }
  };

  await new Promise<void>((resolve) => {
    let buf = "";
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearInterval(watchdog);
      resolve();
    };
    const fill = (): void => {
      let text = "";
      // Request s goes out once request s - window is answered: at most
      // `window` in flight, and what the driver knows when it draws request s
      // does not depend on timing.
      while (pending.size < opts.window && sent < opts.requests && !pending.has(sent + 1 - opts.window)) {
        const seq = ++sent;
        const sample = seq === 1 || seq % opts.sampleEvery === 0 || seq === opts.requests;
        const { line, p } = w.next(seq, sample);
        pending.set(seq, p);
        text += line;
        // The first request is a lone stats: the curve's row for the empty process.
        if (seq === 1) break;
      }
      if (text) child.stdin.write(text);
      if (sent >= opts.requests && pending.size === 0) finish();
    };
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      buf += chunk;
      let start = 0;
      let nl: number;
      while ((nl = buf.indexOf("\n", start)) !== -1) {
        const line = buf.slice(start, nl);
        start = nl + 1;
        responses++;
        let msg: Record<string, unknown>;
        try {
          msg = JSON.parse(line) as Record<string, unknown>;
        } catch {
          fail(`stdout line is not JSON: ${line.slice(0, 200)}`);
          continue;
        }
        const id = msg["id"];
        const p = typeof id === "number" ? pending.get(id) : undefined;
        if (!p) {
          fail(`response with id ${JSON.stringify(id)} answers no request in flight (duplicate or unknown): ${line.slice(0, 200)}`);
          continue;
        }
        pending.delete(id as number);
        handle(p, msg);
      }
      buf = buf.slice(start);
      lastProgress = performance.now();
      fill();
    });
    child.on("close", (code, signal) => {
      if (!done) {
        exitedEarly = true;
        fail(`the sidecar exited early (code ${code}, signal ${signal}) after ${sent} requests, ${pending.size} unanswered; stderr: ${stderrTail.slice(-2000)}`);
        finish();
      }
    });
    const watchdog = setInterval(() => {
      try {
        peakSeen = Math.max(peakSeen, readStatus(pid, "VmRSS"));
      } catch {
        // the process has gone; the close handler reports it
      }
      if (performance.now() - lastProgress > opts.stallMs) {
        fail(`no response for ${opts.stallMs} ms with ${pending.size} in flight (lost: ids ${[...pending.keys()].slice(0, 10).join(", ")})`);
        finish();
      }
    }, 1000);
    fill();
  });
  const durationMs = performance.now() - t0;

  let peakRssKiB = peakSeen;
  if (!exitedEarly) {
    try {
      peakRssKiB = readStatus(pid, "VmHWM");
    } catch {
      // keep the watchdog's figure
    }
  }
  // End of input: the sidecar answers what it read (nothing is left) and exits 0.
  child.stdin.end();
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  const exitCode = await exited;
  clearTimeout(timer);

  if (pending.size) fail(`${pending.size} requests never answered (lost): ids ${[...pending.keys()].slice(0, 10).join(", ")}`);
  if (responses !== sent) fail(`${sent} requests sent, ${responses} responses received`);
  if (exitCode !== 0 && !exitedEarly) fail(`the sidecar exited with ${exitCode} after stdin ended; stderr: ${stderrTail.slice(-2000)}`);
  if (stderrWarnings) fail(`the sidecar logged ${stderrWarnings} warning or error lines; last stderr: ${stderrTail.slice(-1000)}`);
  const s = w.store;
  if (s.evictions !== s.created - s.live.size - s.closed) fail(`model arithmetic: evictions ${s.evictions} != created ${s.created} - live ${s.live.size} - closed ${s.closed}`);
  const last = curve[curve.length - 1];
  if (last && last.requests === opts.requests && last.evicted !== s.created - s.live.size - s.closed) fail(`stats.evicted ${last.evicted} != threads opened ${s.created} - live ${s.live.size} - closed ${s.closed}`);

  // The memory curve.
  let baseline: Sample | undefined;
  let growth: number | undefined;
  let slopePer100k: number | undefined;
  const fullSample = w.fullAt === undefined ? undefined : curve.find((c) => c.requests >= (w.fullAt as number));
  const fullGrowth = fullSample && last ? (last.rssKiB - fullSample.rssKiB) / fullSample.rssKiB : undefined;
  if (w.plateauAt === undefined) {
    fail(
      w.fullAt === undefined
        ? `the live thread count never reached --max-threads ${opts.maxThreads}: no plateau to check (use more requests or ids)`
        : `the store never turned over ${opts.warmupTurnovers} times (${s.evictions} evictions, ${opts.warmupTurnovers * opts.maxThreads} needed): no plateau to check (use more requests)`,
    );
  } else {
    const post = curve.filter((c) => c.requests >= (w.plateauAt as number));
    baseline = post[0];
    const end = post[post.length - 1];
    if (!baseline || !end || post.length < 3) fail(`only ${post.length} RSS samples after the plateau at request ${w.plateauAt}; need 3 (sample more often)`);
    else {
      growth = (end.rssKiB - baseline.rssKiB) / baseline.rssKiB;
      if (growth > opts.tolerance) fail(`RSS grew ${(growth * 100).toFixed(1)}% after the plateau (${mib(baseline.rssKiB)} MiB at ${baseline.requests} → ${mib(end.rssKiB)} MiB at ${end.requests}); tolerance ${(opts.tolerance * 100).toFixed(0)}%`);
      const n = post.length;
      const mx = post.reduce((a, c) => a + c.requests, 0) / n;
      const my = post.reduce((a, c) => a + c.rssKiB, 0) / n;
      const num = post.reduce((a, c) => a + (c.requests - mx) * (c.rssKiB - my), 0);
      const den = post.reduce((a, c) => a + (c.requests - mx) ** 2, 0);
      slopePer100k = den ? ((num / den) * 100_000) / baseline.rssKiB : 0;
      const tail = post.slice(-opts.trendSamples);
      const head = tail[0] as Sample;
      const rising = tail.length >= 3 && tail.every((c, k) => k === 0 || c.rssKiB > (tail[k - 1] as Sample).rssKiB);
      if (rising && (end.rssKiB - head.rssKiB) / head.rssKiB > opts.trendFloor) {
        fail(`RSS rose at every one of the last ${tail.length} samples (${tail.map((c) => mib(c.rssKiB)).join(" → ")} MiB), ${(((end.rssKiB - head.rssKiB) / head.rssKiB) * 100).toFixed(1)}% in all: growth after the plateau`);
      }
    }
  }
  if (mismatches > MAX_DETAILS) failures.push(`${mismatches} failures in all`);

  return {
    options: opts,
    sent,
    responses,
    curve,
    fullAt: w.fullAt,
    plateauAt: w.plateauAt,
    fullSample,
    fullGrowth,
    baseline,
    growth,
    slopePer100k,
    peakRssKiB,
    durationMs,
    evictions: s.evictions,
    created: s.created,
    closed: s.closed,
    live: s.live.size,
    errors,
    methods: w.methods,
    statsCalls: w.methods["stats"] ?? 0,
    stateBytesRounded: w.roundedStats,
    stderrWarnings,
    nodeWarnings,
    exitCode,
    failures,
  };
}

// ---------------------------------------------------------------- printing

export const mib = (kib: number): string => (kib / 1024).toFixed(1);
const num = (n: number): string => n.toLocaleString("en-US");

export function formatHeader(o: Required<Omit<SoakOptions, "onSample">>): string {
  return `soak: ${num(o.requests)} requests over ${num(o.ids)} thread ids, --max-threads ${num(o.maxThreads)}, seed ${o.seed}, ${o.window} in flight, stats every ${num(o.statsEvery)}${o.nodeOptions ? `, NODE_OPTIONS=${o.nodeOptions}` : ""}`;
}

export function formatRow(s: Sample): string {
  return `| ${num(s.requests).padStart(9)} | ${mib(s.rssKiB).padStart(7)} | ${num(s.threads).padStart(7)} | ${num(s.stateBytes).padStart(11)} | ${num(s.evicted).padStart(7)} | ${(s.elapsedMs / 1000).toFixed(1).padStart(6)} |`;
}

export const TABLE_HEAD = "|  requests | RSS MiB | threads |  stateBytes | evicted | time s |\n|----------:|--------:|--------:|------------:|--------:|-------:|";

export function formatCurve(r: SoakReport): string {
  return [TABLE_HEAD, ...r.curve.map(formatRow)].join("\n");
}

export function formatSummary(r: SoakReport): string {
  const errs = Object.entries(r.errors)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${num(v)}`)
    .join(", ");
  const methods = Object.entries(r.methods)
    .sort(([, a], [, b]) => b - a)
    .map(([k, v]) => `${k} ${num(v)}`)
    .join(", ");
  const lines = [
    `requests sent ${num(r.sent)}, responses ${num(r.responses)}, unanswered ${num(r.sent - r.responses)}; sidecar exit code ${r.exitCode}`,
    `mix: ${methods}`,
    `threads opened ${num(r.created)}, closed ${num(r.closed)}, live at the end ${num(r.live)}, evicted ${num(r.evictions)} (= opened − live − closed)`,
    `${num(r.statsCalls)} stats calls: threads, evicted, requests and stateBytes checked against the model at each${r.stateBytesRounded ? ` (stateBytes matched the documented measure with 4-5 digit integers counted as 6 and 7-8 digit ones as 9 in ${num(r.stateBytesRounded)} of them)` : ""}`,
    `errors by code (every one predicted by the model): ${errs || "none"}`,
    `duration ${(r.durationMs / 1000).toFixed(1)} s (${num(Math.round(r.sent / (r.durationMs / 1000)))} requests/s); peak RSS (VmHWM) ${mib(r.peakRssKiB)} MiB`,
  ];
  const pct = (x: number): string => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(1)}%`;
  const end = r.curve[r.curve.length - 1];
  if (r.fullAt !== undefined && r.fullSample && r.fullGrowth !== undefined && end) {
    lines.push(`store full (${num(r.options.maxThreads)} live threads) from request ${num(r.fullAt)}; RSS ${mib(r.fullSample.rssKiB)} MiB at ${num(r.fullSample.requests)} → ${mib(end.rssKiB)} MiB at the end: ${pct(r.fullGrowth)}, V8's heap warm-up included (reported, not checked)`);
  }
  if (r.plateauAt !== undefined && r.baseline && r.growth !== undefined && end) {
    const post = r.curve.filter((c) => c.requests >= (r.plateauAt as number));
    const peak = Math.max(...post.map((c) => c.rssKiB));
    lines.push(
      `plateau from request ${num(r.plateauAt)} (store full and turned over ${r.options.warmupTurnovers}×): RSS ${mib(r.baseline.rssKiB)} MiB at ${num(r.baseline.requests)} → ${mib(end.rssKiB)} MiB at ${num(end.requests)}: ${pct(r.growth)} (tolerance ${(r.options.tolerance * 100).toFixed(0)}%); highest sample on the plateau ${mib(peak)} MiB; least-squares trend ${pct(r.slopePer100k ?? 0)} per 100k requests`,
    );
  }
  if (r.options.nodeOptions) lines.push(`sidecar NODE_OPTIONS: ${r.options.nodeOptions} (Node's own warnings on stderr: ${r.nodeWarnings})`);
  lines.push(r.failures.length ? `FAIL:\n  - ${r.failures.join("\n  - ")}` : "PASS");
  return lines.join("\n");
}
