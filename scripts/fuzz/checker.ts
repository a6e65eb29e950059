import jsonpatch from "fast-json-patch";
import { sameJson } from "../harness/json.js";
import type { Response } from "../harness/jsonrpc.js";
import { parsePointerText, type Call, type FuzzStream } from "./wire.js";

/**
 * The fuzzer's oracle: follows one stream's responses in order and checks
 * each against what its call must provoke, with a client-side replica of
 * every tracked thread replayed through fast-json-patch as @ag-ui/client
 * applies deltas.
 */

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
export const short = (v: unknown, n = 300): string => {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s;
};


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
 * Whether applying one op as given to `doc`, as fast-json-patch does, leaves it equal to what it was: such an op is
 * not sent (protocol/README.md §5 rule 8), and every other op is. Undefined when fast-json-patch refuses the op,
 * which then changes nothing on the client either; the sidecar, which reads some targets differently (§5 rule
 * 6), may still apply it.
 */
function leavesAsIs(doc: unknown, o: Obj): boolean | undefined {
  const op: Obj = { ...o, path: escape(segments(o["path"]) ?? []) };
  if (o["from"] !== undefined) op["from"] = escape(segments(o["from"]) ?? []);
  try {
    return sameJson(jsonpatch.applyPatch(clone(doc), [clone(op) as unknown as jsonpatch.Operation], true, false).newDocument, doc);
  } catch {
    return undefined;
  }
}

/**
 * Whether `delta` is what applying `ops` (less the skipped ones) to `state` must emit (protocol/README.md §5): each op
 * with its path escaped; a `replace` of a missing member, or of a member named `-`, as `add`; `add X []` before an
 * append to a missing X; a forward move within an array as remove + add; nothing for a `test`, nor for an op that
 * leaves the state as it stands equal to what it was (rule 8: an equal write, a move onto itself, a copy onto an
 * equal member), judged by fast-json-patch on the state the earlier ops' deltas left. And no op names the root
 * (rule 7): a `copy` from `""` comes out as an `add` of the root's copy, and an op that writes the root as the diff
 * of the old root to the new one, which only the replicas can check, so the mapping stops there.
 */
function emitted(ops: unknown[], skipped: Obj[], delta: Obj[], state: unknown): string | undefined {
  const root = delta.findIndex((x) => (segments(x["path"]) ?? []).length === 0 || (x["from"] !== undefined && (segments(x["from"]) ?? []).length === 0));
  if (root >= 0) return `delta op ${root} names the root: ${short(delta[root], 200)}`;
  const skip = new Set(skipped.map((k) => k["index"]));
  const seg = (p: unknown): string | undefined => JSON.stringify(segments(p));
  const is = (x: Obj | undefined, op: string, path: unknown, value?: unknown): boolean => x?.["op"] === op && seg(x["path"]) === seg(path) && (value === undefined || sameJson(x["value"], value));
  let d = 0;
  let doc = clone(state);
  for (let i = 0; i < ops.length; i++) {
    const o = (isObj(ops[i]) ? ops[i] : {}) as Obj;
    if (skip.has(i) || o["op"] === "test") continue;
    const [x, next, path] = [delta[d], delta[d + 1], segments(o["path"]) ?? []];
    if (path.length === 0) return undefined;
    if (leavesAsIs(doc, o) === true) {
      // The next op sent is this one, as it was given: the sidecar sent an op that changes nothing.
      if (is(x, String(o["op"]), o["path"], o["value"]) && seg(x?.["from"]) === seg(o["from"])) return `op ${i} ${short(o, 200)} leaves the state as it was, and was sent`;
      continue;
    }
    const start = d;
    const fromRoot = o["op"] === "copy" && (segments(o["from"]) ?? []).length === 0;
    // The value a copy from the root adds is the root as it stood, which the replicas check.
    const value = fromRoot ? undefined : o["value"];
    if (o["op"] === "move" && is(x, "remove", o["from"]) && is(next, "add", o["path"])) d += 2;
    else if ((o["op"] === "add" || fromRoot) && path[path.length - 1] === "-" && is(x, "add", path.slice(0, -1), []) && is(next, "add", o["path"], value)) d += 2;
    else if (fromRoot && is(x, "add", o["path"])) d++;
    else if ((is(x, String(o["op"]), o["path"], value) || (o["op"] === "replace" && is(x, "add", o["path"], value))) && seg(x?.["from"]) === seg(o["from"])) d++;
    else return `op ${i} ${short(o, 200)} came out as ${short(x, 200)}`;
    try {
      doc = jsonpatch.applyPatch(doc, clone(delta.slice(start, d)) as unknown as jsonpatch.Operation[], true, false).newDocument;
    } catch {
      // The replicas report a delta that does not apply; past it, the state the ops meet is unknown here.
      return undefined;
    }
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
export class Checker {
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
      if (!sameJson(delta, ev?.["delta"] ?? [])) this.fault(`openRun delta is not its STATE_DELTA's ops: ${at}`);
      if (res["threadId"] !== p["threadId"] || res["runId"] !== p["runId"]) this.fault(`openRun echoes the wrong threadId/runId: ${at}`);
      if (rep.sound && after !== undefined && res["version"] !== (rep.live ? rep.version : 0) + (sameJson(before, after) ? 0 : 1)) this.fault(`openRun version ${short(res["version"])} after ${rep.version}: ${at}`);
      if (sound && after !== undefined) {
        // protocol/README.md §6: the client's members are kept; the namespace holds toolState, or what it held, or {}.
        const kept = p["state"] !== undefined ? p["state"] : before;
        const map = p["toolState"] ?? (isObj(kept) && ns !== undefined && isObj(kept[ns]) ? kept[ns] : {});
        if (!sameJson(omit(after, ns), omit(kept, ns)) || (ns !== undefined && !sameJson((after as Obj)[ns], map))) this.fault(`openRun: the replayed state is not the state given plus its namespace: ${at}: ${short(after)}`);
      }
      Object.assign(rep, { live: true, sound: sound && after !== undefined, state: after, version: res["version"], ns });
    } else if ((c.method === "applyOps" || c.method === "diffState" || c.method === "diffToolState") && rep) {
      if (!rep.live) this.fault(`succeeded on a thread that is not open: ${at}`);
      if (!Array.isArray(delta) || !sameJson(res["events"], delta.length ? [{ type: "STATE_DELTA", delta }] : [])) return void this.fault(`events are not [STATE_DELTA delta]: ${at}`);
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
      if (want && !sameJson(res["state"], want.value)) this.fault(`getState differs from the replayed events: ${at}: server ${short(res["state"])}, replica ${short(want.value)}`);
    } else if (c.method === "closeThread" && rep) {
      if (res["closed"] !== rep.live) this.fault(`closeThread says closed: ${short(res["closed"])} for a thread that is ${rep.live ? "open" : "not open"}: ${at}`);
      Object.assign(rep, { live: false, closed: rep.closed || rep.live, sound: true, state: {}, version: 0, ns: undefined });
    } else if (c.method === "escapePointer" && res["pointer"] !== escape(p["path"] as unknown[])) this.fault(`escapePointer gave ${short(res["pointer"])}: ${at}`);
    else if (c.method === "parsePointer" && !sameJson(res["path"], parsePointerText(p["pointer"] as string))) this.fault(`parsePointer gave ${short(res["path"])}: ${at}`);
    else if (c.method === "normalize") {
      const out = this.play(clone(p["state"] ?? {}), [{ type: "STATE_DELTA", delta }], at);
      if (out !== undefined && !sameJson(out, res["state"])) this.fault(`normalize: its delta applied to its state is not the state it returns: ${at}`);
      this.mapping(p, res, p["state"] ?? {}, at);
    } else if (!["openRun", "applyOps", "diffState", "diffToolState", "getState", "closeThread", "escapePointer", "parsePointer", "stats", "rpc.discover"].includes(c.method)) this.fault(`unknown method answered with a result: ${at}`);
  }

  /** What diffState, diffToolState and applyOps must have done, checked on the replayed state. */
  private meaning(c: Call, p: Obj, rep: Replica, after: unknown, res: Obj, at: string): void {
    const before = rep.state;
    const delta = res["delta"] as Obj[];
    if (c.method === "diffState") {
      const was = resolve(before, p["path"]);
      if (!sameJson(resolve(after, p["path"])?.value, p["value"])) this.fault(`diffState: the replayed state does not hold the value at the path: ${at}`);
      if (was && sameJson(was.value, p["value"]) && delta.length) this.fault(`diffState of an equal value sent ${delta.length} ops: ${at}`);
      // Never larger than one replace of the subtree; at a root of two objects, than one per changed member.
      const size = (x: unknown): number => Buffer.byteLength(JSON.stringify(x));
      const whole = [{ op: "replace", path: escape(segments(p["path"]) ?? []), value: p["value"] }];
      const members = isObj(before) && isObj(p["value"]) && was?.value === before ? new Set([...Object.keys(before), ...Object.keys(p["value"])]) : undefined;
      const bound = members ? [...members].reduce((a, k) => a + size({ op: "replace", path: escape([k]), value: (p["value"] as Obj)[k] ?? null }) + 1, 2) : size(whole);
      if (delta.length && !(members && delta.some((op) => op["path"] === "")) && size(delta) > bound) this.fault(`diffState sent ${size(delta)} bytes, more than ${bound} for replacing what changed: ${at}: ${short(delta)}`);
      if (isObj(before) && isObj(p["value"]) && was?.value === before && delta.some((op) => op["path"] === "")) {
        // Only a "__proto__" member that is added, removed or changed needs the whole root: no op may name it.
        const v = p["value"];
        const moved = Object.hasOwn(v, "__proto__") !== Object.hasOwn(before, "__proto__") || !sameJson(before["__proto__"], v["__proto__"]);
        if (!moved) this.fault(`diffState replaced the whole root, wiping the client's own members: ${at}`);
      }
    } else if (c.method === "diffToolState") {
      const old = isObj(before) && rep.ns !== undefined ? before[rep.ns] : undefined;
      if (rep.ns === undefined || !isObj(old)) return void this.fault(`diffToolState succeeded on a thread without a namespace map: ${at}`);
      const want = isObj(p["toolState"]) ? p["toolState"] : { ...old };
      if (!isObj(p["toolState"])) for (const [k, v] of Object.entries((p["set"] as Obj | undefined) ?? {})) Object.defineProperty(want, k, { value: v, enumerable: true, configurable: true, writable: true });
      if (!isObj(p["toolState"])) for (const k of (p["remove"] as string[] | undefined) ?? []) if (!Object.hasOwn((p["set"] as Obj | undefined) ?? {}, k)) delete want[k];
      if (!sameJson((after as Obj)[rep.ns], want) || !sameJson(omit(after, rep.ns), omit(before, rep.ns))) this.fault(`diffToolState: the replayed namespace is not the map asked for: ${at}`);
      if (sameJson(old, want) && delta.length) this.fault(`diffToolState sent ${delta.length} ops when nothing moved: ${at}`);
      const keys = delta.map((op) => parsePointerText(String(op["path"]))?.[1] ?? "");
      if (keys.some((k, i) => i > 0 && !((keys[i - 1] as string) < k))) this.fault(`diffToolState ops are not sorted by key: ${at}: ${short(keys)}`);
    } else this.mapping(p, res, before, at);
  }

  /** applyOps and normalize: the skips are well-formed, and the delta is the ops asked for, normalized. */
  private mapping(p: Obj, res: Obj, state: unknown, at: string): void {
    const [ops, skipped] = [p["ops"] as unknown[], res["skipped"] as Obj[]];
    const bad = (k: Obj): boolean => !Number.isInteger(k["index"]) || (k["index"] as number) < 0 || (k["index"] as number) >= ops.length || typeof k["code"] !== "string";
    if (!Array.isArray(skipped) || skipped.some(bad)) return void this.fault(`skipped is malformed: ${at}`);
    if (p["atomic"] === true && skipped.length) this.fault(`atomic applyOps succeeded with skips: ${at}`);
    const wrong = emitted(ops, skipped, res["delta"] as Obj[], state);
    if (wrong) this.fault(`the delta is not the ops asked for: ${wrong}: ${at}`);
  }
}
