/**
 * Fuzzes the running sidecar with seeded, replayable streams of hostile
 * messages (test/helpers/fuzz-streams.ts), NDJSON and LSP, and checks after
 * each stream:
 * - the process lived until stdin ended (or SIGTERM), then exited 0, and its
 *   stderr is pino records with nothing logged at error level;
 * - stdout parses completely as frames of the input's framing;
 * - every id of a well-formed request is answered exactly once, no id is
 *   answered that was never sent, and the id-null answers are within bounds;
 * - no -32603; every error has a string data.code; calls that must fail fail;
 *   pure methods answer what the contract says;
 * - every delta applies with fast-json-patch applyPatch(s, d, true, false), as
 *   @ag-ui/client applies it; replaying a thread's events lands on getState
 *   (state and version) mid-stream and at the end; what openRun, diffState and
 *   diffToolState did matches what was asked;
 * - sentinel threads, opened first and never named again, are unchanged.
 *
 *   npm run fuzz                   ~20k messages in 4 streams (what npm test runs)
 *   npm run fuzz -- --long         ~600k messages in 24 streams
 *   npm run fuzz -- --seed N       replay (also FUZZ_SEED=N); the same options give the same streams
 *   --streams N, --messages N (per stream), --huge N (per stream); FUZZ_BIN=path fuzzes another build
 */
import jsonpatch from "fast-json-patch";
import { pathToFileURL } from "node:url";
import { buildStream, parsePointerText, type Call, type FuzzStream, type StreamOptions } from "../test/helpers/fuzz-streams.js";
import { asResponse, BINARY, parseFrames, parseLog, start, type Response } from "../test/helpers/spawn.js";

export interface StreamReport extends Pick<FuzzStream, "seed" | "framing" | "forced" | "tight" | "sigterm" | "signal" | "messages"> {
  bytes: number;
  frames: number; // frames received
  responses: number;
  answered: number; // distinct ids answered
  certain: number; // ids that had to be answered exactly once
  deltas: number; // deltas replayed on client-side replicas
  compared: number; // getState answers compared with a replica
  outcomes: Map<string, number>; // "applyOps ok", "openRun -32004", …
  faults: string[];
  ms: number;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const short = (v: unknown, n = 300): string => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s;
};

/** JSON equality: key order does not matter, own members only. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((x, i) => same(x, (b as unknown[])[i]));
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && same((a as Obj)[k], (b as Obj)[k]));
}

const segments = (path: unknown): string[] | undefined => (path === undefined ? [] : typeof path === "string" ? parsePointerText(path) : Array.isArray(path) ? path.map(String) : undefined);

/** The value at a pointer or Path, own members only; undefined when it is not there. */
function resolve(doc: unknown, path: unknown): { value: unknown } | undefined {
  let at = doc;
  for (const s of segments(path) ?? [null]) {
    if (s !== null && Array.isArray(at) && /^(0|[1-9]\d*)$/.test(s) && Number(s) < at.length) at = at[Number(s)];
    else if (s !== null && isObj(at) && Object.hasOwn(at, s)) at = at[s];
    else return undefined;
  }
  return { value: at };
}

/** Whether a path names a member no op may name (protocol/README.md §3). */
const forbidden = (path: unknown): boolean => (segments(path) ?? []).some((k, i, all) => k === "__proto__" || (k === "prototype" && all[i - 1] === "constructor"));
/** An object without its namespace member, to compare what lies outside it. */
const omit = (v: unknown, ns: string | undefined): unknown => (ns === undefined || !isObj(v) ? v : Object.fromEntries(Object.entries(v).filter(([k]) => k !== ns)));
const escape = (path: unknown[]): string => path.map((s) => `/${String(s).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");

/**
 * Whether `delta` is what applying `ops` (less the skipped ones) must emit (protocol/README.md §5): each op with its
 * path escaped; a `replace` of a missing member as `add`; `add X []` before an append to a missing X; a
 * forward move within an array as remove + add; nothing for a `test` or a move onto itself.
 */
function emitted(ops: unknown[], skipped: Obj[], delta: Obj[]): string | undefined {
  const skip = new Set(skipped.map((k) => k["index"]));
  const seg = (p: unknown): string | undefined => JSON.stringify(segments(p));
  const is = (x: Obj | undefined, op: string, path: unknown, value?: unknown): boolean => x?.["op"] === op && seg(x["path"]) === seg(path) && (value === undefined || same(x["value"], value));
  let d = 0;
  for (let i = 0; i < ops.length; i++) {
    const o = (isObj(ops[i]) ? ops[i] : {}) as Obj;
    if (skip.has(i) || o["op"] === "test" || (o["op"] === "move" && seg(o["from"]) === seg(o["path"]))) continue;
    const [x, next, path] = [delta[d], delta[d + 1], segments(o["path"]) ?? []];
    if (o["op"] === "move" && is(x, "remove", o["from"]) && is(next, "add", o["path"])) d += 2;
    else if (o["op"] === "add" && path[path.length - 1] === "-" && is(x, "add", path.slice(0, -1), []) && is(next, "add", o["path"], o["value"])) d += 2;
    else if ((is(x, String(o["op"]), o["path"], o["value"]) || (o["op"] === "replace" && is(x, "add", o["path"], o["value"]))) && seg(x?.["from"]) === seg(o["from"])) d++;
    else return `op ${i} ${short(o, 200)} came out as ${short(x, 200)}`;
  }
  return d === delta.length ? undefined : `${delta.length - d} ops more than asked for`;
}

/** A client-side replica of one thread; `sound` is false once a delta failed to apply (later checks would only repeat it). */
interface Replica {
  live: boolean;
  closed: boolean;
  sound: boolean;
  state: unknown;
  version: number;
  ns: string | undefined;
}

/** Follows one stream's responses in order, with a replica per tracked thread. */
class Checker {
  readonly faults: string[] = [];
  readonly answered = new Map<string, number>();
  readonly outcomes = new Map<string, number>();
  count = 0;
  nulls = 0;
  deltas = 0;
  compared = 0;
  private readonly byId = new Map<string, Call>();
  private readonly replicas = new Map<string, Replica>();
  private lastFrame = 0;

  constructor(private readonly s: FuzzStream) {
    for (const f of s.frames) for (const c of f.calls) if (c.id !== undefined && c.id !== null) this.byId.set(JSON.stringify(c.id), c);
  }

  fault(msg: string): undefined {
    if (this.count++ < 40) this.faults.push(msg);
    return undefined;
  }

  private rep(t: string): Replica {
    if (!this.replicas.has(t)) this.replicas.set(t, { live: false, closed: false, sound: true, state: {}, version: 0, ns: undefined });
    return this.replicas.get(t) as Replica;
  }

  /** Where a call came from, for a fault: its frame's kind and first bytes. */
  private where(c: Call): string {
    const f = this.s.frames[c.frame];
    return `${c.method.slice(0, 40)} id ${JSON.stringify(c.id)} (frame ${c.frame}, ${f?.kind}: ${short(f?.bytes.subarray(0, 600).toString("utf8"), 400)})`;
  }

  response(r: Response): void {
    if (r.id === null) {
      this.nulls++;
      if ("error" in r && r.error.code === -32603) this.fault(`internal error answered with id null: ${short(r.error)}`);
      return;
    }
    const key = JSON.stringify(r.id);
    const n = (this.answered.get(key) ?? 0) + 1;
    this.answered.set(key, n);
    if (n === 2) this.fault(`id ${key} answered more than once`);
    if (!this.s.sent.has(key)) this.fault(`id ${key} answered but never sent: ${short(r)}`);
    const c = this.byId.get(key);
    if (!c || n > 1) return;
    if (c.frame < this.lastFrame) this.fault(`responses out of order: ${this.where(c)} after frame ${this.lastFrame}`);
    this.lastFrame = c.frame;
    const outcome = `${c.method.slice(0, 20)} ${"error" in r ? r.error.code : "ok"}`;
    this.outcomes.set(outcome, (this.outcomes.get(outcome) ?? 0) + 1);
    const at = this.where(c);
    if (!("error" in r)) {
      if (c.expect === "error") this.fault(`expected an error, got a result: ${at}: ${short(r.result)}`);
      return isObj(r.result) ? this.result(c, r.result, at) : void this.fault(`result is not an object: ${at}`);
    }
    const e = r.error;
    const rep = c.thread !== undefined ? this.rep(c.thread) : undefined;
    if (e.code === -32603) this.fault(`internal error: ${at}: ${short(e)}`);
    if (typeof e.data?.code !== "string") this.fault(`error without a string data.code: ${at}: ${short(e)}`);
    if (c.expect === "ok") this.fault(`expected a result, got an error: ${at}: ${short(e)}`);
    else if (c.code !== undefined && e.code !== c.code) this.fault(`expected error ${c.code}, got ${e.code}: ${at}: ${short(e)}`);
    else if (c.reason !== undefined && e.data?.["reason"] !== c.reason) this.fault(`expected reason ${c.reason}: ${at}: ${short(e)}`);
    const path = c.params?.["path"];
    const missing = ["PATH_NOT_FOUND", "INVALID_INDEX", "INDEX_OUT_OF_BOUNDS"].includes(String(e.data?.["reason"]));
    if (c.method === "getState" && missing && c.expect !== "error" && rep?.live && rep.sound && !forbidden(path) && resolve(rep.state, path)) this.fault(`getState refuses a path the replayed state has: ${at}: ${short(e)}`);
    if (rep && e.code === -32001 && rep.live) this.fault(`UNKNOWN_THREAD for a thread that is open: ${at}`);
    else if (rep && e.code === -32001 && e.data?.["reason"] !== (rep.closed ? "closed" : "never opened")) this.fault(`UNKNOWN_THREAD reason ${short(e.data?.["reason"])}: ${at}`);
  }

  /** Applies events as @ag-ui/client does; undefined (and a fault) when one does not apply. */
  private play(state: unknown, events: unknown, at: string): unknown {
    if (!Array.isArray(events)) return this.fault(`events is not an array: ${at}`);
    let s = state;
    for (const ev of events as Obj[]) {
      if (ev["type"] === "STATE_SNAPSHOT") s = clone(ev["snapshot"]);
      else if (ev["type"] !== "STATE_DELTA" || !Array.isArray(ev["delta"])) return this.fault(`unknown event ${short(ev)}: ${at}`);
      else {
        const delta = ev["delta"] as jsonpatch.Operation[];
        if (delta.some((op) => op.op === "test")) this.fault(`an event carries a test op: ${at}`);
        try {
          // A copy: fast-json-patch puts the ops' values into the document, where later ops change them.
          s = jsonpatch.applyPatch(s, clone(delta), true, false).newDocument;
          this.deltas++;
        } catch (e) {
          return this.fault(`delta does not apply with fast-json-patch (${(e as Error).message.split("\n")[0]}): ${at}: delta ${short(delta)}`);
        }
      }
    }
    return s;
  }

  private result(c: Call, res: Obj, at: string): void {
    const p = (c.params ?? {}) as Obj;
    const rep = c.thread !== undefined ? this.rep(c.thread) : undefined;
    const delta = res["delta"] as Obj[];
    if (c.method === "openRun" && rep) {
      const before = rep.live ? rep.state : {};
      const sound = rep.sound || p["state"] !== undefined;
      const after = this.play(clone(p["state"] !== undefined ? p["state"] : before), res["events"], at);
      const ev = (res["events"] as Obj[] | undefined)?.find((e) => e["type"] === "STATE_DELTA");
      const ns = (p["namespace"] as string | undefined) ?? (rep.live ? rep.ns : undefined) ?? (p["toolState"] !== undefined ? "toolState" : undefined);
      if (!same(delta, ev?.["delta"] ?? [])) this.fault(`openRun delta is not its STATE_DELTA's ops: ${at}`);
      if (res["threadId"] !== p["threadId"] || res["runId"] !== p["runId"]) this.fault(`openRun echoes the wrong threadId/runId: ${at}`);
      if (rep.sound && after !== undefined && res["version"] !== (rep.live ? rep.version : 0) + (same(before, after) ? 0 : 1)) this.fault(`openRun version ${short(res["version"])} after ${rep.version}: ${at}`);
      if (sound && after !== undefined) {
        // protocol/README.md §6: the client's members are kept; the namespace holds toolState, or what it held, or {}.
        const kept = p["state"] !== undefined ? p["state"] : before;
        const map = p["toolState"] ?? (isObj(kept) && ns !== undefined && isObj(kept[ns]) ? kept[ns] : {});
        if (!same(omit(after, ns), omit(kept, ns)) || (ns !== undefined && !same((after as Obj)[ns], map))) this.fault(`openRun: the replayed state is not the state given plus its namespace: ${at}: ${short(after)}`);
      }
      Object.assign(rep, { live: true, sound: sound && after !== undefined, state: after, version: res["version"], ns });
    } else if ((c.method === "applyOps" || c.method === "diffState" || c.method === "diffToolState") && rep) {
      if (!rep.live) this.fault(`succeeded on a thread that is not open: ${at}`);
      if (!Array.isArray(delta) || !same(res["events"], delta.length ? [{ type: "STATE_DELTA", delta }] : [])) return void this.fault(`events are not [STATE_DELTA delta]: ${at}`);
      if (res["version"] !== rep.version + (delta.length ? 1 : 0)) this.fault(`version ${short(res["version"])} after ${rep.version}, delta of ${delta.length}: ${at}`);
      const after = rep.sound ? this.play(rep.state, res["events"], at) : undefined;
      if (after !== undefined) this.meaning(c, p, rep, after, res, at);
      Object.assign(rep, { sound: after !== undefined, state: after, version: res["version"] });
    } else if (c.method === "getState" && rep) {
      if (!rep.live) return void this.fault(`getState answered for a thread that is not open: ${at}`);
      if (res["version"] !== rep.version) this.fault(`getState version ${short(res["version"])}, replayed ${rep.version}: ${at}`);
      const want = rep.sound ? resolve(rep.state, p["path"]) : undefined;
      if (rep.sound && !want && !forbidden(p["path"])) this.fault(`getState serves a path the replayed state does not have: ${at}`);
      if (want) this.compared++;
      if (want && !same(res["state"], want.value)) this.fault(`getState differs from the replayed events: ${at}: server ${short(res["state"])}, replica ${short(want.value)}`);
    } else if (c.method === "closeThread" && rep) {
      if (res["closed"] !== rep.live) this.fault(`closeThread says closed: ${short(res["closed"])} for a thread that is ${rep.live ? "open" : "not open"}: ${at}`);
      Object.assign(rep, { live: false, closed: rep.closed || rep.live, sound: true, state: {}, version: 0, ns: undefined });
    } else if (c.method === "escapePointer" && res["pointer"] !== escape(p["path"] as unknown[])) this.fault(`escapePointer gave ${short(res["pointer"])}: ${at}`);
    else if (c.method === "parsePointer" && !same(res["path"], parsePointerText(p["pointer"] as string))) this.fault(`parsePointer gave ${short(res["path"])}: ${at}`);
    else if (c.method === "normalize") {
      const out = this.play(clone(p["state"] ?? {}), [{ type: "STATE_DELTA", delta }], at);
      if (out !== undefined && !same(out, res["state"])) this.fault(`normalize: its delta applied to its state is not the state it returns: ${at}`);
      this.mapping(p, res, at);
    } else if (!["openRun", "applyOps", "diffState", "diffToolState", "getState", "closeThread", "escapePointer", "parsePointer", "stats", "rpc.discover"].includes(c.method)) this.fault(`unknown method answered with a result: ${at}`);
  }

  /** What diffState, diffToolState and applyOps must have done, checked on the replayed state. */
  private meaning(c: Call, p: Obj, rep: Replica, after: unknown, res: Obj, at: string): void {
    const before = rep.state;
    const delta = res["delta"] as Obj[];
    if (c.method === "diffState") {
      const was = resolve(before, p["path"]);
      if (!same(resolve(after, p["path"])?.value, p["value"])) this.fault(`diffState: the replayed state does not hold the value at the path: ${at}`);
      if (was && same(was.value, p["value"]) && delta.length) this.fault(`diffState of an equal value sent ${delta.length} ops: ${at}`);
      // Never larger than one replace of the subtree; at a root of two objects, than one per changed member.
      const size = (x: unknown): number => Buffer.byteLength(JSON.stringify(x));
      const whole = [{ op: "replace", path: escape(segments(p["path"]) ?? []), value: p["value"] }];
      const members = isObj(before) && isObj(p["value"]) && was?.value === before ? new Set([...Object.keys(before), ...Object.keys(p["value"])]) : undefined;
      const bound = members ? [...members].reduce((a, k) => a + size({ op: "replace", path: escape([k]), value: (p["value"] as Obj)[k] ?? null }) + 1, 2) : size(whole);
      if (delta.length && !(members && delta.some((op) => op["path"] === "")) && size(delta) > bound) this.fault(`diffState sent ${size(delta)} bytes, more than ${bound} for replacing what changed: ${at}: ${short(delta)}`);
      if (isObj(before) && isObj(p["value"]) && was?.value === before && delta.some((op) => op["path"] === "")) {
        // Only a "__proto__" member that is added, removed or changed needs the whole root: no op may name it.
        const v = p["value"];
        const moved = Object.hasOwn(v, "__proto__") !== Object.hasOwn(before, "__proto__") || !same(before["__proto__"], v["__proto__"]);
        if (!moved) this.fault(`diffState replaced the whole root, wiping the client's own members: ${at}`);
      }
    } else if (c.method === "diffToolState") {
      const old = isObj(before) && rep.ns !== undefined ? before[rep.ns] : undefined;
      if (rep.ns === undefined || !isObj(old)) return void this.fault(`diffToolState succeeded on a thread without a namespace map: ${at}`);
      const want = isObj(p["toolState"]) ? p["toolState"] : { ...old };
      if (!isObj(p["toolState"])) for (const [k, v] of Object.entries((p["set"] as Obj | undefined) ?? {})) Object.defineProperty(want, k, { value: v, enumerable: true, configurable: true, writable: true });
      if (!isObj(p["toolState"])) for (const k of (p["remove"] as string[] | undefined) ?? []) if (!Object.hasOwn((p["set"] as Obj | undefined) ?? {}, k)) delete want[k];
      if (!same((after as Obj)[rep.ns], want) || !same(omit(after, rep.ns), omit(before, rep.ns))) this.fault(`diffToolState: the replayed namespace is not the map asked for: ${at}`);
      if (same(old, want) && delta.length) this.fault(`diffToolState sent ${delta.length} ops when nothing moved: ${at}`);
      const keys = delta.map((op) => parsePointerText(String(op["path"]))?.[1] ?? "");
      if (keys.some((k, i) => i > 0 && !((keys[i - 1] as string) < k))) this.fault(`diffToolState ops are not sorted by key: ${at}: ${short(keys)}`);
    } else this.mapping(p, res, at);
  }

  /** applyOps and normalize: the skips are well-formed, and the delta is the ops asked for, normalized. */
  private mapping(p: Obj, res: Obj, at: string): void {
    const [ops, skipped] = [p["ops"] as unknown[], res["skipped"] as Obj[]];
    const bad = (k: Obj): boolean => !Number.isInteger(k["index"]) || (k["index"] as number) < 0 || (k["index"] as number) >= ops.length || typeof k["code"] !== "string";
    if (!Array.isArray(skipped) || skipped.some(bad)) return void this.fault(`skipped is malformed: ${at}`);
    if (p["atomic"] === true && skipped.length) this.fault(`atomic applyOps succeeded with skips: ${at}`);
    const wrong = emitted(ops, skipped, res["delta"] as Obj[]);
    if (wrong) this.fault(`the delta is not the ops asked for: ${wrong}: ${at}`);
  }
}

/** Sends one stream to a fresh process and checks every invariant. */
export async function runStream(s: FuzzStream): Promise<StreamReport> {
  const t0 = performance.now();
  const check = new Checker(s);
  const child = start({ name: "agui-state", file: process.env["FUZZ_BIN"] ?? BINARY, args: [] }, s.args, s.env);
  const all = Buffer.concat(s.frames.map((f) => f.bytes));
  const stopAt = s.sigterm > 0 ? Math.floor(all.length * s.sigterm) : Infinity;
  let at = 0;
  for (const n of s.writes) {
    if (child.exited || at >= stopAt) break;
    await child.write(all.subarray(at, (at += n)));
  }
  if (child.exited) check.fault(`the process exited before stdin ended: ${JSON.stringify(child.exited)}; stderr: ${child.stderr.slice(-2000)}`);
  // SIGTERM or SIGINT: it stops reading, answers what it read, and exits 0 with stdin still open.
  // Only once it has answered something: a signal during start-up would meet no handler yet.
  if (s.sigterm > 0) await child.until(() => child.stdout.length > 0, "a first response").then(() => child.kill(s.signal), (e: Error) => check.fault(e.message.slice(0, 2000)));
  else child.end();
  try {
    const exit = await child.waitForExit(120_000);
    if (exit.code !== 0 || exit.signal !== null) check.fault(`the process exited with ${JSON.stringify(exit)} after ${s.sigterm ? s.signal : "stdin ended"}; stderr: ${child.stderr.slice(-2000)}`);
  } catch (e) {
    child.kill();
    check.fault((e as Error).message.slice(0, 2000));
  }
  let frames: unknown[] = [];
  try {
    frames = parseFrames(s.framing, child.stdout);
  } catch (e) {
    check.fault(`stdout is not a clean sequence of frames: ${(e as Error).message}`);
  }
  let responses = 0;
  for (const f of frames) {
    try {
      if (Array.isArray(f) && f.length === 0) throw new Error("an empty array of responses");
      for (const r of Array.isArray(f) ? f : [f]) {
        responses++;
        check.response(asResponse(r));
      }
    } catch (e) {
      check.fault((e as Error).message);
    }
  }
  let [certain, min, max] = [0, 0, 0];
  for (const f of s.frames) {
    [min, max] = [min + f.nulls[0], max + f.nulls[1]];
    // After SIGTERM, what was never read is never answered: only "at most once" holds.
    if (!f.certain || s.sigterm > 0) continue;
    for (const c of f.calls.filter((x) => x.id !== undefined && x.id !== null)) {
      const n = check.answered.get(JSON.stringify(c.id)) ?? 0;
      certain++;
      if (n !== 1) check.fault(`id ${JSON.stringify(c.id)} answered ${n} times: ${c.method.slice(0, 40)} in frame ${c.frame} (${f.kind}): ${short(f.bytes.subarray(0, 600).toString("utf8"))}`);
    }
  }
  if ((check.nulls < min && !s.sigterm) || check.nulls > max) check.fault(`${check.nulls} responses with id null, expected ${min}..${max}`);
  try {
    for (const rec of parseLog(child.stderr)) if (rec.level >= 50) check.fault(`logged at error level: ${short(rec, 500)}`);
  } catch (e) {
    check.fault((e as Error).message.slice(0, 500));
  }
  if (check.count > check.faults.length) check.faults.push(`… and ${check.count - check.faults.length} more faults`);
  const { seed, framing, forced, tight, sigterm, signal, messages } = s;
  return { seed, framing, forced, tight, sigterm, signal, messages, bytes: all.length, frames: frames.length, responses, answered: check.answered.size, certain, deltas: check.deltas, compared: check.compared, outcomes: check.outcomes, faults: check.faults, ms: Math.round(performance.now() - t0) };
}

export interface FuzzOptions {
  seed: number;
  streams: number;
  messages: number;
  huge: number;
  log?: (line: string) => void;
}

/**
 * Stream i: seed + i; NDJSON and LSP in turn; framing detected or forced, and
 * default or tight limits, so that streams 0-3 cover both framings and 0-7
 * every combination.
 */
export function streamOptions(o: FuzzOptions, i: number): StreamOptions {
  const forced = ((i >> 1) & 1) === 1;
  const tight = forced !== (((i >> 2) & 1) === 1);
  return { seed: (o.seed + i) | 0, messages: o.messages, framing: i % 2 ? "lsp" : "ndjson", forced, tight, huge: o.huge };
}

export async function fuzz(o: FuzzOptions): Promise<StreamReport[]> {
  const reports: StreamReport[] = [];
  for (let i = 0; i < o.streams; i++) {
    const t0 = performance.now();
    const stream = buildStream(streamOptions(o, i));
    const gen = Math.round(performance.now() - t0);
    const r = await runStream(stream);
    reports.push(r);
    const how = `${r.framing} ${r.forced ? "forced" : "auto"}${r.tight ? ", tight limits" : ""}${r.sigterm ? `, ${r.signal} at ${Math.round(r.sigterm * 100)}%` : ""}`;
    o.log?.(`[fuzz] stream ${i + 1}/${o.streams} seed ${r.seed} ${how}: ${r.messages} messages, ${(r.bytes / 1e6).toFixed(1)} MB, ${r.frames} frames back, ${r.answered} ids answered, ${r.faults.length ? `${r.faults.length} FAULTS` : "ok"} (${gen} ms to generate, ${r.ms} ms to run)`);
  }
  return reports;
}

async function main(): Promise<void> {
  const arg = (name: string): string | undefined => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
  const long = process.argv.includes("--long");
  const seedText = arg("--seed") ?? process.env["FUZZ_SEED"];
  const seed = seedText !== undefined ? Number(seedText) : Math.floor(Math.random() * 2 ** 31);
  if (!Number.isSafeInteger(seed)) throw new Error(`bad seed ${seedText}`);
  const o: FuzzOptions = { seed, streams: Number(arg("--streams") ?? (long ? 24 : 4)), messages: Number(arg("--messages") ?? (long ? 25_000 : 5_000)), huge: Number(arg("--huge") ?? (long ? 6 : 2)), log: (l) => console.error(l) };
  const others = process.argv.slice(2).filter((a, i, all) => a !== "--seed" && all[i - 1] !== "--seed");
  console.error(`[fuzz] seed ${seed} (replay: npm run fuzz -- ${[...others, "--seed", seed].join(" ")})`);
  const t0 = performance.now();
  const reports = await fuzz(o);
  const sum = (f: (r: StreamReport) => number): number => reports.reduce((a, r) => a + f(r), 0);
  const faults = reports.flatMap((r) => r.faults.map((f) => `stream seed ${r.seed} (${r.framing}): ${f}`));
  const count = (framing: string): number => reports.filter((r) => r.framing === framing).length;
  console.log(`fuzz summary: seed ${seed}, ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  console.log(`  streams:           ${reports.length} (${count("ndjson")} NDJSON, ${count("lsp")} LSP; ${reports.filter((r) => r.tight).length} under tight limits, ${reports.filter((r) => r.sigterm).length} stopped by SIGTERM or SIGINT)`);
  console.log(`  messages sent:     ${sum((r) => r.messages)} (${(sum((r) => r.bytes) / 1e6).toFixed(1)} MB)`);
  console.log(`  frames received:   ${sum((r) => r.frames)} (${sum((r) => r.responses)} responses)`);
  console.log(`  requests answered: ${sum((r) => r.answered)} ids; ${sum((r) => r.certain)} well-formed requests checked answered exactly once`);
  console.log(`  replica checks:    ${sum((r) => r.deltas)} deltas replayed with fast-json-patch, ${sum((r) => r.compared)} getState answers compared`);
  console.log(`  faults found:      ${faults.length}`);
  console.log(`  seeds:             ${reports.map((r) => r.seed).join(", ")}`);
  for (const f of faults) console.log(`  FAULT ${f}`);
  process.exitCode = faults.length ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exitCode = 2;
  });
}
