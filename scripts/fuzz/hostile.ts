import fc from "fast-check";
import { json, KEYS } from "../harness/arbitraries.js";
import { PARAMS } from "../harness/protocol-params.js";
import { Gen } from "./generator.js";
import { BAD_UTF8, BIG, deep, isObj, NOT_JSON, NUMBERS, THREADS, type Broken } from "./vocabulary.js";
import { Dup, Raw, TIGHT, type Call, type Expect } from "./wire.js";

/** The hostile moves: bad envelopes, garbage, odd spellings and numbers, broken LSP frames, huge and deep messages. */
export class HostileGen extends Gen {
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

  /**
   * An integer literal beyond 2^53 in params (refused), or a member name given twice (the last one wins).
   * Never in a baseline (openRun's and openStream's `state`), which is read as the client's double
   * instead (protocol/README.md §3; test/hardening/numbers.test.ts holds that).
   */
  private oddRequest(dup: boolean): void {
    const c = this.valid("tracked");
    const names = c.params ? Object.keys(c.params).filter((n) => dup || !(n === "state" && (c.method === "openRun" || c.method === "openStream"))) : [];
    if (!c.params || !names.length || !Object.hasOwn(PARAMS, c.method)) return this.single("request", c);
    const p = c.params;
    const name = this.pick(names);
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
