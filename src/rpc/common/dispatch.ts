import { err, IntegralFloat, isObject, type Result } from "../../core/index.js";
import { mayNestPast, scanJson, type ScanProblem } from "../../json/scan.js";
import { mayHoldUnsafeNumber, parseJson } from "../../json/parse.js";
import { escapeHidden, showText } from "../../json/show.js";
import { stringifyJson } from "../../json/stringify.js";
import { locateSyntaxError } from "../../json/syntax-error.js";
import type { Log } from "../../log.js";
import { invalidParams, limitExceeded, type CallError, type CallResult } from "../../protocol/errors.js";
import { ENVELOPE_DEPTH } from "../../protocol/limits.js";
import type { StateService } from "../../service/state-service.js";
import type { StreamService } from "../../service/stream-service.js";
import type { Frame } from "./frame.js";
import { encodeResult } from "./encode.js";
import { METHODS, type CallContext } from "./methods.js";
import { failed, internalError, invalidRequest, methodNotFound, parseError, toWireError, type Id, type Response, type WireError } from "./wire.js";

/** The limits the dispatcher itself enforces (protocol/README.md §7); the service holds the others. */
export interface DispatchLimits {
  maxMessageBytes: number;
  maxDepth: number;
}

const reply = (response: Response): string => stringifyJson(response);

/**
 * What a frame is answered with: the response's text, nothing (a notification), or, when a method
 * answers later (protocol/README.md §16, readRejoin and rejoinStream), a promise of either. The
 * transport writes a later reply when it settles, so replies may leave in another order than their
 * requests came (JSON-RPC 2.0 §6 matches them by id).
 */
export type Reply = string | AttachedReply | undefined | Promise<string | undefined>;

/**
 * A reply whose result's `text` goes as the frame's attachment (protocol/README.md §2,
 * `Agui-Reply-Text: attachment`): `json` is the response without it.
 */
export class AttachedReply {
  constructor(
    readonly json: string,
    readonly attachment: string,
  ) {}
}

/** protocol/README.md §2: the methods whose result's `text` may go back as an attachment. */
const REPLY_TEXT: ReadonlySet<string> = new Set(["fixStream", "closeStream"]);

/**
 * JSON-RPC 2.0 §4 and protocol/README.md §2: a string, null, or a number that
 * can be echoed exactly (`7.0`, an IntegralFloat, is echoed as `7.0`).
 */
const isId = (v: unknown): v is Id =>
  typeof v === "string" || v === null || (typeof v === "number" && Number.isFinite(v) && (!Number.isInteger(v) || Number.isSafeInteger(v))) || (v instanceof IntegralFloat && Number.isSafeInteger(v.value));

/** Params that carry a caller's JSON values, whose numbers keep their kind (`ops` too: decodeOp reads their paths). */
const VALUE_PARAMS = new Set(["state", "toolState", "set", "value", "content", "ops"]);

/**
 * protocol/README.md §3, baselines: the methods whose `state` is a state the client sent
 * (RunAgentInput.state, handed on by the server), read as the client's JSON.parse reads it: an
 * integer beyond ±(2^53 − 1) there is the double the client holds, not UNSAFE_INTEGER, since the
 * client, not the server, wrote it and cannot send it as a string.
 */
const BASELINE_METHODS: ReadonlySet<string> = new Set(["openRun", "openStream"]);
const isBaseline = (member: string): boolean => member === "state";

/**
 * protocol/README.md §3: a number the protocol itself reads (`ifVersion`, an
 * index in a Path) is the number it holds, `3.0` as `3`, as JSON Schema's
 * "integer" has it. Only JSON values keep the kind they came with. Called
 * only for params parseJson looked at twice, the only ones that can hold an
 * IntegralFloat; such a number sits at the top or in a Path, one level down.
 */
function settleNumbers(params: Record<string, unknown>): void {
  for (const k of Object.keys(params)) {
    if (VALUE_PARAMS.has(k)) continue;
    const v = params[k];
    if (v instanceof IntegralFloat) params[k] = v.value;
    else if (Array.isArray(v)) for (let i = 0; i < v.length; i++) if (v[i] instanceof IntegralFloat) v[i] = (v[i] as IntegralFloat).value;
  }
}

function scanError(found: ScanProblem, maxDepth: number): CallError {
  switch (found.kind) {
    case "unsafe-integer":
      return invalidParams(found.field, "UNSAFE_INTEGER", `${found.field} is the integer ${found.source.slice(0, 40)}, beyond ±(2^53 - 1), which no number here keeps exact; send it as a string`);
    case "overflow":
      return invalidParams(found.field, "NUMBER_OVERFLOW", `${found.field} is the number ${found.source.slice(0, 40)}, beyond the range of a double; it would arrive as null`);
    case "too-deep":
      return limitExceeded("maxDepth", maxDepth, found.depth);
  }
}

/**
 * Why a message is not JSON, for people: where it breaks and what stands
 * there, then how it starts, every invisible character escaped (a BOM is
 * `\ufeff`). Only on the error path: the locating pass reads the text again.
 */
function notJson(text: string, e: unknown): string {
  const at = locateSyntaxError(text);
  const why = at ? `not JSON at line ${at.line}, column ${at.column}: ${at.message}` : `not JSON: ${escapeHidden((e as Error).message)}`;
  return `${why}; the message starts ${showText(text, 60)}`;
}

/**
 * JSON-RPC 2.0 over frames, done by hand rather than through vscode-jsonrpc's
 * MessageConnection, which cannot answer batches, drops `id: null`, and costs
 * several times the CPU per request (bench/connection-overhead.ts; the figures
 * are in docs/benchmarks.md, "Figures behind choices in the source").
 * Every request with an id gets exactly one response; notifications get none.
 * Runtime-neutral: it sees frames and text, never a stream.
 */
export class Dispatcher {
  private count = 0;
  private readonly context: CallContext;
  /** Nesting the params walk allows (protocol/README.md §7). */
  private readonly maxNesting: number;
  private readonly debug: boolean;

  constructor(
    service: StateService,
    streams: StreamService,
    private readonly limits: DispatchLimits,
    private readonly log: Log,
    owner?: object,
  ) {
    this.context = { service, streams, requests: () => this.count, owner };
    this.maxNesting = limits.maxDepth + ENVELOPE_DEPTH;
    // The level is set once, at start: asking pino per request costs a lookup on the hot path.
    this.debug = log.isLevelEnabled("debug");
  }

  /** Requests with an id received so far: every well-formed request with an id, whatever its answer. */
  get requests(): number {
    return this.count;
  }

  /** Handles one frame; returns the response text to send, if any, or its promise. */
  handle(frame: Frame): Reply {
    switch (frame.kind) {
      case "text":
        return this.handleText(frame.text, frame.attachment, frame.replyText === true);
      case "bad-utf8":
        return JSON.stringify(failed(null, parseError("the message is not valid UTF-8")));
      case "bad-header":
        return JSON.stringify(failed(null, invalidRequest(`bad LSP header block (${frame.detail})`)));
      case "stray-line":
        // protocol/README.md §2: answered, so that a client waiting on it is not left waiting; reading goes on at the next line.
        return JSON.stringify(failed(null, parseError(`a line that is neither ${frame.json ? "JSON nor " : ""}an LSP header (Content-Length: N): ${showText(frame.head, 60)}${frame.bytes > frame.head.length ? ` (${frame.bytes} bytes)` : ""}; skipped`)));
      case "oversized": {
        const id = idFromHead(frame.head);
        const limit = this.limits.maxMessageBytes;
        // protocol/README.md §7: -32003 when the id can be read from the message's first bytes, else -32600.
        const error = id === undefined ? invalidRequest(`message of ${frame.bytes} bytes is over maxMessageBytes ${limit}`) : toWireError(limitExceeded("maxMessageBytes", limit, frame.bytes));
        return JSON.stringify(failed(id ?? null, error));
      }
    }
  }

  handleText(text: string, attachment?: string, replyText = false): Reply {
    let msg: unknown;
    // The params scan (unsafe integers, nesting) can only find something in
    // a message with a number token parseJson marks (a long digit run, an
    // exponent, `1.0`), or one with enough brackets to nest past the limit.
    // Most messages have neither and skip it.
    const unsafe = mayHoldUnsafeNumber(text);
    const scan = unsafe || mayNestPast(text, this.maxNesting);
    try {
      msg = parseJson(text, unsafe);
    } catch (e) {
      return JSON.stringify(failed(null, parseError(notJson(text, e))));
    }
    if (!Array.isArray(msg)) return this.handleOne(msg, scan, attachment, replyText);
    // JSON-RPC 2.0 §6: an empty batch is one invalid request; a batch of
    // notifications gets nothing at all.
    if (msg.length === 0) return JSON.stringify(failed(null, invalidRequest("empty batch")));
    // protocol/README.md §2: an attachment is one request's, never a batch's.
    if (attachment !== undefined) return JSON.stringify(failed(null, invalidRequest("a batch cannot carry an attachment (Agui-Text-Length): it is one request's fixStream text or openStream request body")));
    // Each reply is serialized as soon as its member has run: a later member
    // may change a value an earlier reply's delta still refers to.
    const out: (string | Promise<string | undefined>)[] = [];
    let later = false;
    for (const m of msg) {
      const r = this.handleOne(m, scan) as string | undefined | Promise<string | undefined>;
      if (r === undefined) continue;
      if (typeof r !== "string") later = true;
      out.push(r);
    }
    // A batch is answered as one array (§2): with a member that answers later, once they all have.
    if (later) return Promise.all(out).then((all) => joinBatch(all.filter((r): r is string => r !== undefined)));
    return joinBatch(out as string[]);
  }

  /**
   * One request or notification (JSON-RPC 2.0 §4), checked member by member
   * in the order protocol/README.md §6 gives, so the first failure answers.
   * Returns the response's JSON text, or undefined for a notification.
   */
  private handleOne(msg: unknown, scan: boolean, attachment?: string, replyText = false): Reply {
    if (!isObject(msg)) return reply(failed(null, invalidRequest("a request must be an object")));
    const hasId = "id" in msg;
    let id: Id = null;
    if (hasId) {
      const given = msg["id"];
      if (!isId(given)) return reply(failed(null, invalidRequest("id must be a string, a number (a safe integer) or null")));
      id = given;
    }
    const method = msg["method"];
    if (msg["jsonrpc"] !== "2.0") return reply(failed(id, invalidRequest('jsonrpc must be "2.0"')));
    if (typeof method !== "string") return reply(failed(id, invalidRequest("method must be a string")));
    const raw = "params" in msg ? msg["params"] : {};
    if (hasId) this.count++;
    const started = this.debug ? performance.now() : 0;
    const out = this.call(method, raw, scan, attachment);
    if (out instanceof Promise) return out.then((o) => this.answer(o, id, hasId, method, started) as string | undefined);
    if (replyText && hasId && out.ok && REPLY_TEXT.has(method)) {
      const { text, ...rest } = out.value as { text?: unknown };
      if (typeof text === "string") {
        this.answer(out, id, false, method, started); // its debug line only: the reply is built here
        return new AttachedReply(encodeResult(id, rest), text);
      }
    }
    return this.answer(out, id, hasId, method, started);
  }

  private answer(out: Result<object, WireError>, id: Id, hasId: boolean, method: string, started: number): string | undefined {
    if (started) this.log.debug({ id: id instanceof IntegralFloat ? id.value : id, method, ms: +(performance.now() - started).toFixed(3), ok: out.ok }, "request");
    if (!hasId) return undefined;
    // Serialized at once: a later member of a batch may change a value this delta still refers to.
    return out.ok ? encodeResult(id, out.value) : reply(failed(id, out.error));
  }

  private call(method: string, raw: unknown, scan: boolean, attachment: string | undefined): Result<object, WireError> | Promise<Result<object, WireError>> {
    if (Array.isArray(raw)) return err(toWireError(invalidParams("", "POSITIONAL_PARAMS", "params must be an object (by name), not an array")));
    if (!isObject(raw)) return err(invalidRequest("params must be an object"));
    const m = METHODS.get(method);
    if (!m) return err(methodNotFound(method));
    const found = scan ? scanJson(raw, this.maxNesting, BASELINE_METHODS.has(method) ? isBaseline : undefined) : undefined;
    if (found) return err(toWireError(scanError(found, this.limits.maxDepth)));
    if (scan) settleNumbers(raw);
    // After the params walk: an attachment is text, with no number or nesting in it to check.
    if (attachment !== undefined) {
      const refused = attach(method, raw, attachment);
      if (refused) return err(toWireError(refused));
    }
    try {
      const out = m.call(this.context, raw);
      if (out instanceof Promise) return out.then(wire, (e: unknown) => this.bug(e, method));
      return wire(out);
    } catch (e) {
      return this.bug(e, method);
    }
  }

  /** A bug, not an expected failure: answer, log, and keep serving. */
  private bug(e: unknown, method: string): Result<object, WireError> {
    this.log.error({ err: e, method }, "internal error");
    return err(internalError());
  }
}

/**
 * protocol/README.md §2, attachments: the param a method takes as the attachment of its frame, the
 * large text that would otherwise be escaped into the JSON: fixStream's `text`, openStream's
 * `request.body`. Nowhere else.
 */
const ATTACHED: ReadonlyMap<string, readonly string[]> = new Map([
  ["fixStream", ["text"]],
  ["openStream", ["request", "body"]],
]);

/** Puts the attachment in its param; the error when the method takes none, or the param came in the params too. */
function attach(method: string, raw: Record<string, unknown>, attachment: string): CallError | undefined {
  const path = ATTACHED.get(method);
  if (path === undefined) return invalidParams("", "UNKNOWN_PARAM", `${method} takes no attachment (Agui-Text-Length): only fixStream's text and openStream's request body travel so (protocol/README.md §2)`);
  const field = "/" + path.join("/");
  let holder = raw;
  for (const key of path.slice(0, -1)) {
    const next = holder[key];
    if (!isObject(next)) return invalidParams("/" + key, "MISSING", `${method}: the attachment is ${field}, so ${key} must be an object`);
    holder = next;
  }
  const key = path[path.length - 1] as string;
  if (Object.hasOwn(holder, key)) return invalidParams(field, "CONFLICTING_PARAMS", `${method}: ${field} came both in params and as the attachment (Agui-Text-Length); send it one way`);
  holder[key] = attachment;
  return undefined;
}

const wire = (out: CallResult<object>): Result<object, WireError> => (out.ok ? out : err(toWireError(out.error)));

const joinBatch = (out: string[]): string | undefined => (out.length ? `[${out.join(",")}]` : undefined);

/**
 * Finds the id of an oversized message from its first bytes, when it is a
 * top-level member that comes before anything large (as clients usually send
 * it: `{"jsonrpc":"2.0","id":7,"method":...`). undefined when it cannot be read.
 */
export function idFromHead(head: string): Id | undefined {
  const m = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*|"method"\s*:\s*"[^"\\]{0,200}"\s*,\s*){0,2}"id"\s*:\s*(-?\d{1,16}(?:\.\d+)?(?:[eE][+-]?\d+)?|"(?:[^"\\]|\\.){0,1024}"|null)\s*[,}]/.exec(head);
  if (!m) return undefined;
  try {
    const v: unknown = JSON.parse(m[1] as string);
    // An id that a double cannot hold exactly cannot be echoed exactly either.
    if (typeof v === "number") return Number.isInteger(v) && !Number.isSafeInteger(v) ? undefined : v;
    return typeof v === "string" || v === null ? v : undefined;
  } catch {
    return undefined;
  }
}
