import fc from "fast-check";
import { formatPointer, normalize as coreNormalize, type Json } from "../../src/core/index.js";
import { json, jsonObject, key, KEYS, opsFor, paths } from "../harness/arbitraries.js";
import type { Id } from "../harness/jsonrpc.js";
import { PARAMS } from "../harness/protocol-params.js";
import { BAD_POINTERS, isObj, METHODS, NAMESPACES, SCRATCH, SENTINELS, THREAD_METHODS, THREADS, UNKNOWN, WIDE_KEY, wideObject, WRONG, type Broken } from "./vocabulary.js";
import { parsePointerText, TIGHT, toText, type Call, type Frame, type StreamOptions } from "./wire.js";

/**
 * The generator's state and its well-formed moves: seeded choices, ids,
 * valid and wrong calls, batches, and frames in the stream's framing.
 * scripts/fuzz/hostile.ts adds the hostile ones.
 */
export class Gen {
  readonly sent = new Set<string>();
  readonly frames: Frame[] = [];
  readonly threads = new Set<string>([...SENTINELS, ...THREADS]);
  messages = 0;
  /** After a broken LSP frame: the bytes it may swallow, then the frames a resync may skip. Not certain to arrive. */
  windowBytes = 0;
  window = 0;
  cooldown = 0; // frames before the next breakage or huge message
  private nextId = 1;
  /** The generator's guess of each thread's state and namespace, so ops keep aiming at paths that exist. */
  private readonly guess = new Map<string, Json>();
  private readonly ns = new Map<string, string>();
  private readonly ints = new Map<string, fc.Arbitrary<number>>();

  constructor(
    private readonly g: fc.GeneratorValue,
    readonly o: StreamOptions,
  ) {}

  draw = <T>(arb: fc.Arbitrary<T>): T => this.g(() => arb);
  chance = (p: number): boolean => this.int(0, 9999) < p * 10000;
  pick = <T>(xs: readonly T[]): T => xs[this.int(0, xs.length - 1)] as T;
  /** Unbiased: fast-check's bias toward small values would skew every choice made with it. */
  int(min: number, max: number): number {
    const k = `${min},${max}`;
    if (!this.ints.has(k)) this.ints.set(k, fc.noBias(fc.integer({ min, max })));
    return this.draw(this.ints.get(k) as fc.Arbitrary<number>);
  }
  weighted<T>(xs: readonly [number, T][]): T {
    let r = this.int(1, xs.reduce((a, [w]) => a + w, 0));
    for (const [w, x] of xs) if ((r -= w) <= 0) return x;
    return (xs[0] as [number, T])[1];
  }

  id(): Id {
    const n = this.nextId++;
    const r = this.int(0, 19);
    const id: Id = r === 0 ? `r-${n}` : r === 1 ? `\u00fc/~"\u2028${n}` : r === 2 ? -n : r === 3 ? n + 0.5 : n;
    this.sent.add(JSON.stringify(id));
    return id;
  }

  private stateOf = (t: string): Json => this.guess.get(t) ?? {};
  follow = (t: string, ops: unknown[]): unknown => this.guess.set(t, coreNormalize(ops, this.stateOf(t)).state);
  private somePath(st: Json): unknown {
    const base = this.pick(paths(st));
    const p = this.chance(0.3) ? [...base, this.pick([...KEYS, "-", "99"])] : base;
    return this.chance(0.5) ? formatPointer(p) : p;
  }
  /** An object for a state or a map: mostly the nasty ASCII keys, sometimes wide ones. */
  private object = (): fc.Arbitrary<Json> => (this.chance(0.2) ? (wideObject as fc.Arbitrary<Json>) : jsonObject);
  /** A state with no digit run the server would read as an unsafe integer. */
  cleanObject(): Json {
    const v = this.draw(jsonObject);
    return /\d{16}/.test(JSON.stringify(v)) ? {} : v;
  }

  /** Valid params for `method` aimed at `thread`; moves the guess along. */
  params(method: string, thread: string): Record<string, unknown> | undefined {
    const st = this.stateOf(thread);
    const p: Record<string, unknown> = THREAD_METHODS.has(method) ? { threadId: thread } : {};
    const opt = (name: string, chance: number, v: () => unknown): void => void (this.chance(chance) && (p[name] = v()));
    const ns = this.ns.get(thread);
    switch (method) {
      case "openRun": {
        opt("runId", 0.2, () => this.draw(fc.string({ maxLength: 8 })));
        opt("state", 0.6, () => this.draw(this.chance(0.05) ? json : this.object()));
        opt("namespace", 0.2, () => this.pick(NAMESPACES));
        opt("toolState", 0.3, () => this.draw(this.object()));
        opt("snapshot", 0.3, () => this.chance(0.5));
        opt("ifVersion", 0.1, () => this.int(0, 4));
        if (p.state !== undefined) this.guess.set(thread, p.state as Json);
        const now = (p.namespace as string | undefined) ?? ns ?? (p.toolState !== undefined ? "toolState" : undefined);
        const cur = this.stateOf(thread);
        if (now !== undefined && now !== "__proto__") this.ns.set(thread, now);
        if (now !== undefined && isObj(cur)) this.follow(thread, [{ op: "add", path: [now], value: p.toolState ?? cur[now] ?? {} }]);
        return p;
      }
      case "applyOps":
        p.ops = this.draw(opsFor(st));
        opt("atomic", 0.2, () => this.chance(0.5));
        opt("ifVersion", 0.05, () => this.int(0, 4));
        this.follow(thread, p.ops as unknown[]);
        return p;
      case "diffState":
        p.value = this.draw(json);
        opt("path", 0.7, () => this.somePath(st));
        opt("ifVersion", 0.05, () => this.int(0, 4));
        this.follow(thread, [{ op: "replace", path: p.path ?? "", value: p.value }]);
        return p;
      case "diffToolState": {
        if (this.chance(0.4)) p.toolState = this.draw(this.object());
        opt("set", p.toolState ? 0 : 0.8, () => this.draw(this.object()));
        opt("remove", p.toolState ? 0 : 0.5, () => this.draw(fc.array(fc.oneof(key, WIDE_KEY), { maxLength: 3 })));
        opt("ifVersion", 0.05, () => this.int(0, 4));
        if (ns === undefined || !isObj(st) || !isObj(st[ns])) return p;
        const ops = p.toolState !== undefined ? [{ op: "add", path: [ns], value: p.toolState }] : [];
        for (const [k, v] of Object.entries((p.set as Record<string, Json> | undefined) ?? {})) ops.push({ op: "add", path: [ns, k], value: v });
        for (const k of (p.remove as string[] | undefined) ?? []) ops.push({ op: "remove", path: [ns, k], value: null });
        this.follow(thread, ops);
        return p;
      }
      case "getState":
        opt("path", 0.4, () => this.somePath(st));
        return p;
      case "closeThread":
        this.guess.delete(thread);
        this.ns.delete(thread);
        return p;
      case "normalize": {
        const s = this.draw(this.chance(0.2) ? json : jsonObject);
        p.ops = this.draw(opsFor(s));
        opt("state", 0.9, () => s);
        return p;
      }
      case "escapePointer":
        return { path: this.draw(fc.array(fc.oneof(key, WIDE_KEY, fc.string({ maxLength: 4 }), fc.nat({ max: 20 })), { maxLength: 5 })) };
      case "parsePointer":
        return { pointer: this.chance(0.7) ? formatPointer(this.draw(fc.array(fc.oneof(key, WIDE_KEY), { maxLength: 4 }))) : this.pick(BAD_POINTERS) };
      default:
        return this.chance(0.5) ? undefined : {};
    }
  }

  /** A well-formed call: on tracked threads, or `blind` (a notification or id null may touch only scratch threads). */
  valid(scope: "tracked" | "blind"): Call {
    let method = this.weighted(METHODS);
    if (method === "?") method = this.pick(UNKNOWN);
    const thread = !THREAD_METHODS.has(method) ? undefined : scope === "tracked" || method === "getState" ? this.pick(THREADS) : this.pick(SCRATCH);
    const params = this.params(method, thread ?? "none");
    const c: Call = { method, params, expect: ["stats", "rpc.discover", "escapePointer"].includes(method) ? "ok" : "any", frame: -1 };
    if (thread !== undefined && scope === "tracked") c.thread = thread;
    if (method === "parsePointer") c.expect = parsePointerText(params?.["pointer"] as string) ? "ok" : "error";
    if (!Object.hasOwn(PARAMS, method) && method !== "stats" && method !== "rpc.discover") Object.assign(c, { expect: "error", code: -32601 });
    return c;
  }

  /** A call with wrong params: a bad type, a missing or unknown member, params not an object. */
  wrong(): Call {
    const method = this.pick([...Object.keys(PARAMS), "stats"]);
    const thread = THREAD_METHODS.has(method) ? this.pick(THREADS) : undefined;
    const p: Record<string, unknown> = { ...this.params(method, thread ?? "none") };
    const names = PARAMS[method] ?? [];
    const out: Call = { method, params: p, expect: "error", code: -32602, frame: -1, ...(thread !== undefined ? { thread } : {}) };
    const r = names.length ? this.int(0, 9) : this.int(7, 9);
    if (r < 5) {
      const n = this.pick(names);
      p[n] = this.pick(WRONG[n] ?? [5]);
    } else if (r < 7) delete p[names[0] as string];
    else if (r < 9) Object.defineProperty(p, this.pick(["bogus", "toolstate", "__proto__", "constructor", "Path"]), { value: 1, enumerable: true });
    else {
      const bad = this.pick<unknown>([[], [1, "a"], "x", 5, true, null]);
      return { ...out, params: bad as Record<string, unknown>, code: Array.isArray(bad) ? -32602 : -32600 };
    }
    return out;
  }

  envelope(c: Call): Record<string, unknown> {
    const late = c.id !== undefined && this.chance(0.1); // the id after method and params
    const m: Record<string, unknown> = late ? { jsonrpc: "2.0" } : { jsonrpc: "2.0", id: c.id };
    if (c.id === undefined) delete m["id"];
    Object.assign(m, { method: c.method }, c.params !== undefined ? { params: c.params } : {}, late ? { id: c.id } : {});
    return m;
  }

  /** One frame in the stream's framing; `broken` replaces the LSP header, `plain` drops all decoration. */
  emit(kind: string, body: string | Buffer, calls: Call[], nulls: number, broken?: Broken, plain = false): void {
    const b = typeof body === "string" ? Buffer.from(body, "utf8") : body;
    const pad = this.o.framing === "ndjson" && !plain && this.chance(0.05) ? " \t" : "";
    if (this.o.tight && b.length + pad.length > TIGHT.maxMessageBytes && !broken) {
      // Skipped as it streams in: -32003 when its id leads the message, else -32600 with id null.
      if (calls.length === 1 && /^\{"jsonrpc":"2\.0","id":/.test(b.subarray(0, 30).toString("latin1"))) Object.assign(calls[0] as Call, { expect: "error", code: -32003, reason: undefined });
      else [calls, nulls] = [[], 1];
    }
    const certain = this.window === 0 && this.windowBytes === 0 && (!broken || broken.certain === true);
    const n = b.length;
    const header = broken?.header ?? (plain ? `Content-Length: ${n}\r\n\r\n` : this.weighted<string>([[80, `Content-Length: ${n}\r\n\r\n`], [7, `content-length:${n}\r\n\r\n`], [7, `Content-Length: ${n}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n`], [6, `Content-Type: application/json\r\nContent-Length: ${n} \r\n\r\n`]]));
    const parts = this.o.framing === "ndjson" ? [pad, b, plain ? "\n" : this.weighted<string>([[85, "\n"], [10, "\r\n"], [5, "\n \n"]])] : [header, b, this.chance(0.03) ? "\r\n" : ""];
    const bytes = Buffer.concat(parts.map((x) => (typeof x === "string" ? Buffer.from(x, "latin1") : x)));
    if (this.cooldown > 0) this.cooldown--;
    if (this.windowBytes > 0) this.windowBytes = Math.max(0, this.windowBytes - bytes.length);
    else if (this.window > 0) this.window--;
    if (broken) {
      if (broken.window) this.windowBytes = Math.max(this.windowBytes, n + 200);
      this.window = Math.max(this.window, broken.window);
      this.cooldown = Math.max(this.cooldown, 1);
    }
    for (const c of calls) c.frame = this.frames.length;
    this.frames.push({ bytes, calls, nulls: certain && !broken ? [nulls, nulls] : [0, nulls + 3], certain, kind });
  }

  /** One call as its own frame; `wire` replaces its params in the text. */
  single(kind: string, c: Call, how: "id" | "null" | "none" = "id", wire?: unknown): void {
    if (how !== "none") c.id = how === "id" ? this.id() : null;
    const m = this.envelope(c);
    if (wire !== undefined) m["params"] = wire;
    this.messages++;
    this.emit(kind, wire !== undefined ? toText(m) : JSON.stringify(m), how === "none" ? [] : [c], how === "null" ? 1 : 0);
  }

  text = (c: Call): string => ((c.id = this.id()), JSON.stringify(this.envelope(c)));

  /** A batch: empty, notifications only, or mixed with invalid members, id null, wrong params. */
  batch(): void {
    const r = this.int(0, 9);
    if (r === 0) return (this.messages++, this.emit("empty batch", this.pick(["[]", "[ ]"]), [], 1));
    const parts: string[] = [];
    const calls: Call[] = [];
    let nulls = 0;
    for (let i = this.int(1, r === 1 ? 5 : 10); i > 0; i--, this.messages++) {
      const k = r === 1 ? 1 : this.int(0, 19);
      if (k === 1) parts.push(JSON.stringify(this.envelope(this.valid("blind"))));
      else if (k === 2 || k === 3) parts.push(this.pick(["1", '"x"', "null", "[]", "{}", "[[]]", "true"]));
      else if (k === 4) parts.push(JSON.stringify(this.envelope({ ...this.valid("blind"), id: null })));
      else {
        const c = k < 7 ? this.wrong() : this.valid("tracked");
        parts.push(this.text(c));
        calls.push(c);
      }
      if (k >= 2 && k <= 4) nulls++;
    }
    this.emit(r === 1 ? "notification batch" : "batch", `[${parts.join(",")}]`, calls, nulls);
  }

}
