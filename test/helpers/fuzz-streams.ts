import fc from "fast-check";
import { formatPointer, normalize as coreNormalize, type Json } from "../../src/core/index.js";
import { json, jsonObject, key, KEYS, opsFor, paths } from "./arbitraries.js";
import type { Framing, Id } from "./spawn.js";

/**
 * Seeded generator of hostile message streams for the running sidecar;
 * scripts/fuzz.ts sends them and checks the invariants. A stream is a list of
 * frames in one framing, each with what it must provoke: the calls it carries
 * (ids unique across the stream), bounds on the `id: null` responses it costs,
 * and whether it is certain to arrive intact (LSP frames just after a
 * deliberately broken length may be swallowed: their ids may go unanswered,
 * never answered twice). Every choice is drawn from one fast-check `gen()`
 * seeded by the stream's seed, so a seed replays the same bytes.
 */

export type Expect = "ok" | "error" | "any";

export interface Call {
  id?: Id; // absent: a notification
  method: string;
  /** The params the server should see (JSON.parse semantics), even when the wire text spells them otherwise. */
  params: Record<string, unknown> | undefined;
  /** The tracked thread whose client-side replica follows this call's response. */
  thread?: string;
  expect: Expect;
  code?: number;
  reason?: string;
  frame: number;
}

export interface Frame {
  bytes: Buffer;
  calls: Call[];
  nulls: [number, number]; // bounds on the responses with id null
  certain: boolean;
  kind: string;
}

export interface StreamOptions {
  seed: number;
  messages: number;
  framing: Framing;
  forced: boolean; // pass --framing instead of letting auto mode detect it
  tight: boolean; // run under TIGHT limits
  huge: number; // huge or deeply nested messages per stream
}

export interface FuzzStream extends StreamOptions {
  args: string[];
  env: Record<string, string>;
  sigterm: number; // > 0: a signal after this fraction of the bytes, stdin left open
  signal: "SIGTERM" | "SIGINT";
  frames: Frame[];
  writes: number[]; // sizes of the writes the bytes go out in
  sent: Set<string>; // every id the bytes carry anywhere, as JSON text
  threads: string[]; // threads whose whole history is in the stream, sentinels included
  messages: number;
}

/** Tight limits: flags for two of them, environment variables for the others. */
export const TIGHT = { maxMessageBytes: 1 << 20, args: ["--max-message-bytes", "1MiB", "--max-ops", "64"], env: { AGUI_STATE_MAX_DEPTH: "16", AGUI_STATE_MAX_STATE_BYTES: "256KiB" } };

/** Wire text inserted verbatim (integers beyond 2^53, 1e400, 100k-deep nesting), and objects with repeated names. */
export class Raw {
  constructor(readonly text: string) {}
}
export class Dup {
  constructor(readonly entries: [string, unknown][]) {}
}

export function toText(v: unknown): string {
  if (v instanceof Raw) return v.text;
  const members = (es: [string, unknown][]): string => `{${es.map(([k, x]) => `${JSON.stringify(k)}:${toText(x)}`).join(",")}}`;
  if (v instanceof Dup) return members(v.entries);
  if (Array.isArray(v)) return `[${v.map(toText).join(",")}]`;
  return typeof v === "object" && v !== null ? members(Object.entries(v)) : JSON.stringify(v);
}

/** RFC 6901 as the contract defines it; undefined for an invalid pointer. */
export function parsePointerText(p: string): string[] | undefined {
  if (p === "") return [];
  const segs = p.slice(1).split("/");
  if (!p.startsWith("/") || segs.some((s) => /~([^01]|$)/.test(s))) return undefined;
  return segs.map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

const THREADS = ["t0", "t/1", "t~0~1", "constructor", "__proto__", "toString", "-", "0", "\u{1F642}".repeat(256), "\ud800x", "never-opened"];
/** Keys beyond ASCII: astral, lone surrogates, combining marks, BOM, line separator, NUL. */
const WIDE_KEY = fc.oneof(fc.string({ unit: "binary", maxLength: 3 }), fc.constantFrom("\ud800", "\udfff", "a\ud83d", "\uFEFF", "\u2028", "\u00e9", "e\u0301", "\u0000", "\uFFFF", "\u{1F642}", "\uFF0F"));
const wideObject = fc.dictionary(fc.oneof(key, WIDE_KEY), json, { maxKeys: 5 });
const SENTINELS = ["s0", "s/~1", "hasOwnProperty"];
const SCRATCH = ["scratch", "scratch/~"];
const NAMESPACES = ["toolState", "ns/x", "~", "constructor", "-", "0", "__proto__"];
const UNKNOWN = ["foo", "", "openrun", "rpc.x", "__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "applyOps "];
const BAD_POINTERS = ["a", "/~2", "/~", "~1", "/a~", "#/a", " /a"];
const THREAD_METHODS = new Set(["openRun", "applyOps", "diffState", "diffToolState", "getState", "closeThread"]);
const METHODS: [number, string][] = [[14, "openRun"], [24, "applyOps"], [10, "diffState"], [12, "diffToolState"], [10, "getState"], [2, "closeThread"], [8, "normalize"], [5, "escapePointer"], [5, "parsePointer"], [2, "stats"], [1, "rpc.discover"], [3, "?"]];
/** Each method's params that can be made wrong, the required one first, and wrong values for each. */
const PARAMS: Record<string, string[]> = { openRun: ["threadId", "runId", "namespace", "toolState", "snapshot", "ifVersion"], diffToolState: ["threadId", "toolState", "set", "remove", "ifVersion"], applyOps: ["threadId", "ops", "atomic", "ifVersion"], normalize: ["ops"], diffState: ["threadId", "path", "ifVersion"], getState: ["threadId", "path"], closeThread: ["threadId"], escapePointer: ["path"], parsePointer: ["pointer"] };
const WRONG: Record<string, unknown[]> = { threadId: [5, null, "", "x".repeat(257), [], {}, true], runId: [5, null, []], namespace: [5, null, "", {}], toolState: [[], "x", 5, null], set: [[], "x", 5], remove: ["x", {}, [1], [null]], ops: ["x", 5, {}, null], atomic: ["yes", 1, null], snapshot: ["yes", 0, null], ifVersion: [-1, 1.5, "1", null, 9007199254740992], path: [5, null, true, {}, [-1], [1.5], [null], [{}]], pointer: [5, null, [], {}] };
const BIG = ["12345678901234567890", "-98765432109876543210", "9007199254740993"];
const NUMBERS = ["1.0", "1E2", "1e-2", "-0", "-0.0", "1.5e+300", "123456789012345678.0", "12345678901234567890e0", "1e-400", "0.1e1", "5e-324", "9007199254740991", "-9007199254740991"];
const BAD_UTF8 = [[0xff], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80]];
const NOT_JSON = ["{", "}", "]]", '{"jsonrpc":"2.0",}', "NaN", "Infinity", "undefined", "{'id':1}", "// x", '{"a":1}{"b":2}', '"open', "[1,]", "tru", "01", "+1", ".5", "\u0000"];
const deep = (n: number): string => "[".repeat(n) + "]".repeat(n);
const isObj = (v: unknown): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v);
type Broken = { header: string; window: number; certain?: boolean };

class Gen {
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

  /** Requests whose envelope is wrong: jsonrpc, method or id, params not an object, not an object at all. */
  badEnvelope(): void {
    const r = this.int(0, 6);
    this.messages++;
    if (r === 0) return this.emit("not an object", this.pick(["1", '"x"', "null", "true", "[1]"]), [], 1);
    if (r === 1) return this.emit("bad id", `{"jsonrpc":"2.0","id":${this.pick(["true", "{}", "[]", "1e400", ...BIG])},"method":"stats"}`, [], 1);
    const c: Call = { id: this.id(), method: "stats", params: {}, expect: "error", code: -32600, frame: -1 };
    const id = JSON.stringify(c.id);
    const texts = [`{"jsonrpc":"1.0","id":${id},"method":"stats"}`, `{"id":${id},"method":"stats"}`, `{"jsonrpc":"2.0","id":${id},"method":${this.pick(["5", "null", "[]", "{}"])}}`, `{"jsonrpc":"2.0","id":${id},"params":${this.pick(['"x"', "5", "null", "true"])},"method":"stats"}`, `{"jsonrpc":"2.0","id":${id},"result":1}`];
    this.emit("bad envelope", texts[r - 2] as string, [c], 0);
  }

  /** Malformed JSON, truncated text, invalid UTF-8, other spellings, unsafe integers, duplicate names. */
  garbage(): void {
    const r = this.int(0, 10);
    if (r >= 6) return [() => this.oddRequest(false), () => this.oddRequest(true), () => this.overflow(), () => this.respelled(), () => this.numbers()][r - 6]?.();
    this.messages++;
    const t = Buffer.from(this.text(this.valid("tracked")));
    const cut = t.subarray(0, this.int(1, t.length - 1));
    const at = this.int(0, t.length);
    if (r === 0) return this.emit("truncated", cut, [], 1);
    if (r === 1) return this.emit("invalid UTF-8", Buffer.concat([t.subarray(0, at), Buffer.from(this.pick(BAD_UTF8)), t.subarray(at)]), [], 1);
    if (r === 2) return this.emit("random bytes", Buffer.concat([Buffer.from("#"), Buffer.from(this.draw(fc.uint8Array({ minLength: 1, maxLength: 64 })).map((x) => (x === 10 ? 32 : x)))]), [], 1);
    if (r === 3) return this.emit("BOM", Buffer.concat([Buffer.from("\uFEFF"), t]), [], 1);
    if (r === 4) return this.emit("not JSON", this.pick(NOT_JSON), [], 1);
    const printable = (x: Buffer): string => x.toString("latin1").replace(/[^\x20-\x7e]/g, "?");
    // NDJSON: a line cut short and glued to the next message is one line, one parse error.
    if (this.o.framing === "ndjson" && this.chance(0.5)) return this.emit("glued", printable(cut) + this.text(this.valid("blind")), [], 1);
    this.emit("mangled", printable(t).replace(/"/, "'"), [], 1);
  }

  /** The same call spelled otherwise: \u escapes in strings, whitespace between tokens (line breaks in LSP only). */
  private respelled(): void {
    const c = this.valid("tracked");
    c.id = this.id();
    let text = JSON.stringify(this.envelope(c), null, this.pick(["", " ", "\t", " \r"]));
    if (this.o.framing === "ndjson") text = text.replace(/[\r\n]/g, " ");
    let out = "";
    for (let i = 0, str = false; i < text.length; i++) {
      const ch = text[i] as string;
      const n = ch === "\\" ? (text[i + 1] === "u" ? 6 : 2) : 1;
      if (ch === '"') str = !str;
      out += str && /[A-Za-z]/.test(ch) && this.chance(0.2) ? `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}` : text.slice(i, i + n);
      i += n - 1;
    }
    this.messages++;
    this.emit("respelled", out, [c], 0);
  }

  /** Number literals spelled every way JSON allows, added to a tracked thread. */
  private numbers(): void {
    const thread = this.pick(THREADS);
    const spell = this.pick(NUMBERS);
    const params = { threadId: thread, ops: [{ op: "add", path: "/n", value: JSON.parse(spell) as number }] };
    this.follow(thread, params.ops);
    this.single("number spellings", { method: "applyOps", params, thread, expect: "any", frame: -1 }, "id", { ...params, ops: [{ op: "add", path: "/n", value: new Raw(spell) }] });
  }

  /** A literal beyond a double's range (1e400) in params: refused, not stored as null. */
  private overflow(): void {
    const c = this.valid("tracked");
    const name = c.params && Object.hasOwn(PARAMS, c.method) ? this.pick(Object.keys(c.params)) : undefined;
    if (name === undefined) return this.oddRequest(false);
    this.single("overflowing number", { ...c, expect: "error", code: -32602 }, "id", { ...c.params, [name]: new Raw(this.pick(["1e400", "-1e999"])) });
  }

  /** An integer literal beyond 2^53 in params (refused), or a member name given twice (the last one wins). */
  private oddRequest(dup: boolean): void {
    const c = this.valid("tracked");
    if (!c.params || !Object.keys(c.params).length || !Object.hasOwn(PARAMS, c.method)) return this.single("request", c);
    const p = c.params;
    const name = this.pick(Object.keys(p));
    if (!dup) {
      const [big, v] = [new Raw(this.pick(BIG)), p[name]];
      const wire = { ...p, [name]: Array.isArray(v) && v.length && !Array.isArray(v[0]) ? [big, ...v.slice(1)] : big };
      if (isObj(v) && Object.keys(v).length) wire[name] = { ...v, [Object.keys(v)[0] as string]: big };
      return this.single("unsafe integer", { ...c, expect: "error", code: -32602, reason: "UNSAFE_INTEGER" }, "id", wire);
    }
    // The discarded value may hide an unsafe integer where the kept one has nothing: under "__proto__"
    // (it once reached Object.prototype) or deeper than the kept value goes (it once threw).
    const r = this.int(0, 3);
    let decoy: unknown = this.draw(json);
    if (r === 0) decoy = new Dup([["__proto__", new Dup([[this.pick(["ifVersion", "threadId", "path", "x"]), new Raw(this.pick(BIG))]])]]);
    else if (r === 1) decoy = { q: { z: new Raw(this.pick([...BIG, "1e400"])) } };
    this.single("duplicate names", c, "id", new Dup(Object.keys(p).flatMap((n): [string, unknown][] => (n === name ? [[n, decoy], [n, p[n]]] : [[n, p[n]]]))));
  }

  /** LSP only: a broken header block or length, or a body with no header at all. */
  brokenFrame(): void {
    this.messages++;
    const c = this.valid("tracked");
    const body = Buffer.from(this.text(c));
    const n = body.length;
    const cases: [string, Broken][] = [
      ["missing Content-Length", { header: "Content-Type: application/json\r\n\r\n", window: 0 }],
      ["non-numeric Content-Length", { header: `Content-Length: ${this.pick(["abc", "12x", "-3", "1e3", "0x10", "", "99999999999999999999"])}\r\n\r\n`, window: 0 }],
      ["Content-Length too long", { header: `Content-Length: ${n + this.int(1, 48)}\r\n\r\n`, window: 2 }],
      ["Content-Length too short", { header: `Content-Length: ${this.int(1, n - 1)}\r\n\r\n`, window: 2 }],
      ["LF-only header", { header: `Content-Length: ${n}\n\n`, window: 2 }],
      ["no header", { header: "", window: 2 }],
      // Over 8 KiB of header block: answered whether or not it arrives in one read.
      ["9 KB header block", { header: `X-Junk: ${"a".repeat(9000)}\r\nContent-Length: ${n}\r\n\r\n`, window: 0, certain: true }],
    ];
    const [kind, broken] = this.pick(cases);
    this.emit(kind, body, [c], broken.certain ? 0 : 1, broken);
  }

  /** Huge or deep: 100k-deep arrays, multi-MB strings, 10,001 ops, 2,000-member batches, the size and state limits. */
  hugeMessage(): void {
    const big = "ab/~\u00fc\u{1F642}\"\\".repeat(this.int(1, 4) * 100_000);
    const thread = this.pick(THREADS);
    const fresh = (): string => (this.threads.add(`huge-${this.frames.length}`), `huge-${this.frames.length}`);
    const call = (method: string, params: Record<string, unknown>, want: Expect, code?: number, t?: string): Call => ({ method, params, expect: want === "ok" && this.o.tight ? "any" : want, ...(code ? { code } : {}), ...(t ? { thread: t } : {}), frame: -1 });
    const r = this.int(0, this.o.tight ? 12 : 9);
    if (r === 0) return this.single("deep state", call("openRun", { threadId: thread }, "error", -32003, thread), "id", { threadId: thread, state: new Raw(`{"deep":${deep(100_000)}}`) });
    if (r === 1) return (this.messages++, this.emit("deep batch", deep(100_000), [], 1));
    if (r === 2) return this.single("deep op value", call("normalize", {}, "error", -32003), "id", { ops: [{ op: "add", path: "/a", value: new Raw('{"a":'.repeat(100_000) + "1" + "}".repeat(100_000)) }] });
    if (r === 3) {
      const t = fresh();
      this.single("multi-MB state", call("openRun", { threadId: t, state: { big, [big.slice(0, 1000)]: [1] } }, "ok", undefined, t));
      return this.single("copy of a multi-MB string", call("applyOps", { threadId: t, ops: [{ op: "copy", from: "/big", path: "/big2" }] }, "ok", undefined, t));
    }
    if (r === 4) return this.single("multi-MB pointer", call("escapePointer", { path: [big, 0] }, "ok"));
    if (r === 5) return this.single("multi-MB method name", call(big, {}, "error", -32601));
    if (r === 6) return (this.messages++, this.emit("multi-MB garbage", `#${big}`, [], 1));
    if (r === 7) return this.single("10,001 ops", call("applyOps", { threadId: thread, ops: Array.from({ length: 10_001 }, (_, i) => ({ op: "add", path: `/k${i}`, value: i })) }, "error", -32003, thread));
    if (r === 8) return this.single("300-deep pointer", call("getState", { threadId: thread, path: "/a".repeat(300) }, "error", -32003, thread));
    if (r === 9) {
      const calls = Array.from({ length: 2000 }, (): Call => call("escapePointer", { path: [this.pick(KEYS), this.int(0, 9)] }, "ok"));
      this.messages += 2000;
      return this.emit("2,000-member batch", `[${calls.map((c) => this.text(c)).join(",")}]`, calls, 0);
    }
    if (r === 12) {
      // Up to the state limit: a copy past it is skipped (lenient) or fails the call (atomic, diffState).
      const t = fresh();
      this.single("state near the limit", call("openRun", { threadId: t, state: { s: "x".repeat(150_000) } }, "ok", undefined, t));
      this.single("copy past the state limit", { ...call("applyOps", { threadId: t, ops: [{ op: "copy", from: "/s", path: "/t" }] }, "ok", undefined, t), expect: "ok" });
      this.single("atomic copy past the state limit", call("applyOps", { threadId: t, ops: [{ op: "copy", from: "/s", path: "/t" }], atomic: true }, "error", -32002, t));
      return this.single("diffState past the state limit", call("diffState", { threadId: t, path: "/s", value: "y".repeat(300_000) }, "error", -32003, t));
    }
    // A message of exactly the size limit is served; one byte more is not.
    const c: Call = { method: "escapePointer", params: { path: [""] }, expect: r === 10 ? "ok" : "error", ...(r === 10 ? {} : { code: -32003 }), frame: -1, id: this.id() };
    c.params = { path: ["x".repeat(TIGHT.maxMessageBytes - Buffer.byteLength(JSON.stringify(this.envelope(c))) + r - 10)] };
    this.messages++;
    this.emit(r === 10 ? "exactly the size limit" : "one byte over the size limit", JSON.stringify({ jsonrpc: "2.0", id: c.id, method: c.method, params: c.params }), [c], 0, undefined, true);
  }
}

/** Builds a stream from its options; the same options give the same bytes. */
export function buildStream(o: StreamOptions): FuzzStream {
  const gen = new Gen(fc.sample(fc.gen(), { seed: o.seed, numRuns: 1 })[0] as fc.GeneratorValue, o);
  // Whitespace before the first message, which auto mode must look past to pick the framing.
  if (gen.chance(0.3)) gen.frames.push({ bytes: Buffer.from(gen.pick(["\n", " \r\n\t", "\r\n\r\n"])), calls: [], nulls: [0, 0], certain: true, kind: "leading whitespace" });
  // Sentinels: opened with known states first, then never named again until the probes.
  for (const s of SENTINELS) {
    const [state, toolState] = [gen.cleanObject(), gen.cleanObject()];
    gen.single("sentinel", { method: "openRun", params: { threadId: s, state, toolState, snapshot: true }, thread: s, expect: "ok", frame: -1 });
    gen.follow(s, [{ op: "replace", path: "", value: state }, { op: "add", path: ["toolState"], value: toolState }]);
    gen.single("sentinel", { method: "applyOps", params: gen.params("applyOps", s), thread: s, expect: "any", frame: -1 });
  }
  const huge = Array.from({ length: o.huge }, () => gen.int(0, o.messages - 1)).sort((a, b) => a - b);
  while (gen.messages < o.messages) {
    const settled = gen.cooldown === 0 && gen.window === 0 && gen.windowBytes === 0;
    if (huge.length && gen.messages >= (huge[0] as number) && settled) {
      huge.shift();
      gen.hugeMessage();
      continue;
    }
    const kind = gen.weighted<string>([[55, "call"], [10, "wrong"], [8, "batch"], [5, "notification"], [2, "null id"], [5, "envelope"], [11, "garbage"], [o.framing === "lsp" ? 4 : 0, "broken"]]);
    if (kind === "broken" && gen.cooldown === 0) gen.brokenFrame();
    else if (kind === "call" || kind === "broken") gen.single("request", gen.valid("tracked"));
    else if (kind === "wrong") gen.single("wrong params", gen.wrong());
    else if (kind === "batch") gen.batch();
    else if (kind === "notification") gen.single("notification", gen.valid("blind"), "none");
    else if (kind === "null id") gen.single("id null", gen.valid("blind"), "null");
    else if (kind === "envelope") gen.badEnvelope();
    else gen.garbage();
  }
  // Let a broken frame play out, then a barrier that ends whatever it left open, then the probes.
  while (gen.window > 0 || gen.windowBytes > 0 || gen.cooldown > 0) gen.single("filler", gen.valid("blind"), "none");
  gen.frames.push({ bytes: Buffer.from(o.framing === "ndjson" ? "\n" : `\r\n${"x".repeat(100)}\r\n\r\n`), calls: [], nulls: o.framing === "ndjson" ? [0, 0] : [1, 1], certain: true, kind: "barrier" });
  const canary = `${"\u{1F642}".repeat(255)}c`;
  gen.threads.add(canary);
  gen.single("probe", { method: "openRun", params: { threadId: canary, state: { k: [1, "v"], "a/b": { "~": null } } }, thread: canary, expect: "ok", frame: -1 });
  for (const t of gen.threads) gen.single("probe", { method: "getState", params: { threadId: t }, thread: t, expect: "any", frame: -1 });
  gen.single("probe", { method: "stats", params: {}, expect: "ok", frame: -1 });
  gen.single("probe", { method: "escapePointer", params: { path: ["a/b", "~", 0] }, expect: "ok", frame: -1 });
  if (gen.chance(0.5)) {
    // The stream ends inside a message: it is dropped, and the process still exits 0.
    const tail = gen.text(gen.valid("blind"));
    const bytes = o.framing === "ndjson" ? tail.slice(0, gen.int(1, tail.length)) : `Content-Length: ${Buffer.byteLength(tail) + 10}\r\n\r\n${tail}`;
    gen.frames.push({ bytes: Buffer.from(bytes), calls: [], nulls: [0, 1], certain: false, kind: "tail" });
  }
  const writes: number[] = [];
  for (let left = gen.frames.reduce((a, f) => a + f.bytes.length, 0); left > 0; left -= writes[writes.length - 1] as number) {
    const [min, max] = gen.weighted<[number, number]>([[10, [1, 16]], [50, [17, 4096]], [40, [4097, 262_144]]]);
    writes.push(Math.min(left, gen.int(min, max)));
  }
  const args = [...(o.forced ? ["--framing", o.framing] : []), ...(o.tight ? TIGHT.args : [])];
  const env = { AGUI_STATE_LOG_LEVEL: gen.pick(["warn", "info", "debug", "trace"]), ...(o.tight ? TIGHT.env : {}) };
  // One stream in eight is stopped with SIGTERM or SIGINT part-way through instead of ending stdin.
  const sigterm = gen.chance(0.125) ? gen.int(10, 90) / 100 : 0;
  const signal = gen.pick(["SIGTERM", "SIGINT"] as const);
  return { ...o, args, env, sigterm, signal, frames: gen.frames, writes, sent: gen.sent, threads: [...gen.threads], messages: gen.messages };
}
