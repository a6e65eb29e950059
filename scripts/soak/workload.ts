import { sameJson } from "../harness/json.js";
import { escapeToken, KEYS, LOG_CAP, makeBlob, StoreModel, Data, STATUSES, VALUES, WORDS, type Blob, type Json, type LogEntry } from "./model.js";
import type { SoakSettings } from "./options.js";
import { Rng } from "./rng.js";

/**
 * What the simulated agent server sends, and what each answer must be. The
 * server does not read the model to decide what to send: it believes a
 * thread is open until a call says otherwise (-32001), and then reopens it
 * with `openRun` and its stored map, the recovery docs/design.md documents. So
 * unknown-thread errors occur as they would in production.
 */

/** What the model says the answer to one request must be. */
export interface Pending {
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
    if (JSON.stringify(delta) !== text && !sameJson(delta, expected)) return `delta ${JSON.stringify(delta).slice(0, 300)}, model says ${text.slice(0, 300)}`;
    const events = r["events"];
    const want = expected.length ? [{ type: "STATE_DELTA", delta: expected }] : [];
    if (!sameJson(events, want)) return `events ${JSON.stringify(events).slice(0, 300)}, model says ${JSON.stringify(want).slice(0, 300)}`;
    return extra?.(r);
  };
}

/**
 * Draws the requests and predicts their answers. `next(seq)` returns the
 * request line for request number `seq` and updates the model as the sidecar
 * will when it handles that line.
 */
export class Workload {
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
  /** -32001 answers, applied to the agent server's beliefs only once the request `window` later is drawn (replayable). */
  private readonly heard: { seq: number; idx: number; reason: string }[] = [];

  constructor(
    readonly opts: SoakSettings,
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

  liveBytes(): number {
    let n = 0;
    for (const i of this.store.live.keys()) n += this.get(i).bytes();
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
      if (r["stateBytes"] !== bytes) bad.push(`stateBytes ${String(r["stateBytes"])}, model says ${bytes}`);
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
      if (JSON.stringify(delta[0].value) !== ts && !sameJson(delta[0].value, JSON.parse(ts))) return `the namespace add does not carry the map sent`;
      if (!sameJson(r["events"], [{ type: "STATE_DELTA", delta }])) return `events ${JSON.stringify(r["events"]).slice(0, 200)}`;
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
    for (const [k, v] of Object.entries(set)) if (!d.keys.has(k) || !sameJson(d.keys.get(k), v)) names.add(k);
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
      // The value already there changes nothing and is not sent (protocol/README.md §5 rule 8).
      if (!keys.has("status") || !sameJson(keys.get("status"), value)) delta.push({ op: keys.has("status") ? "replace" : "add", path: "/toolState/status", value });
      keys.set("status", value);
    }
    if (this.r.chance(0.1)) {
      // A Path (unescaped segments) naming a key that needs escaping.
      const k = this.r.pick(KEYS);
      const value = this.r.pick(VALUES);
      ops.push({ op: "replace", path: ["toolState", k], value });
      if (!keys.has(k) || !sameJson(keys.get(k), value)) delta.push({ op: keys.has(k) ? "replace" : "add", path: `/toolState/${escapeToken(k)}`, value });
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
      if (!sameJson(r["state"], want)) return `state ${JSON.stringify(r["state"]).slice(0, 300)}, model says ${JSON.stringify(want).slice(0, 300)}`;
      return undefined;
    };
    return { line, p: { seq, method: "getState", idx: i, label, ok } };
  }
}
