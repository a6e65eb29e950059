import { err, isObject, measure, ok, stateOverLimit, type JsonObject, type Path } from "../core/index.js";
import { ownedMembers } from "../edge/own.js";
import { DEFAULT_MAX_REQUEST_BODY } from "../edge/request.js";
import type { Log } from "../log.js";
import { invalidParams, limitExceeded, unknownStream, type CallResult } from "../protocol/errors.js";
import { DEFAULT_LIMITS } from "../protocol/limits.js";
import type * as P from "../protocol/types.js";
import { nodeCrypto } from "../resume/node-crypto.js";
import { Recorder, type ResumeOptions } from "../resume/recorder.js";
import { announcement, headerMap } from "../resume/edge.js";
import { runStart } from "../resume/rejoin.js";
import { StreamStore } from "../store/stream-store.js";
import { Rejoins } from "./rejoins.js";
import { classifyRequest, edgeResult, openFromRequest } from "./stream-edge.js";
import type { StreamCounts } from "./state-service.js";

/** An opened stream: the earlier form's result, which always has one. */
type Opened = P.OpenStreamResult & { streamId: string };

/** What a finding's outcome can be (protocol/README.md §13): the protocol's one list. */
type Outcome = P.StreamFinding["outcome"];

/**
 * What a stream's fixer is given: stream/fixer.ts's FixerOptions, as far as
 * this service uses them. The service names the pipeline only by these
 * shapes, not by import: the layer below the RPC reaches no further than the
 * core, the protocol and the store, and the pipeline (@ag-ui/core's schemas,
 * zod, fast-json-patch) is loaded through `Pipeline`, so that a sidecar that
 * never opens a stream never runs it, and its start-up does not pay for it.
 */
export interface FixerSpec {
  /** Left out: the client's baseline is not known (§13, SNAPSHOT_REPLACES_UNKNOWN). */
  state?: JsonObject;
  /** openStream's `resync`: the client may hold more than `state` (a stream opened again without its replay, §14). */
  resync?: boolean;
  policy: { own: Path[]; snapshots: "pass" | "delta"; joinKeys: boolean; lifecycle: "repair" | "pass" };
  /** The request's thread and run ids, for a RUN_STARTED the lifecycle repair sends. */
  run?: { threadId: string; runId: string };
  /** Every finding, with its outcome (§13): the pipeline's Finding is this protocol type. */
  onFinding: (f: P.StreamFinding) => void;
  framing?: "sse" | "ndjson";
}

/** What the service needs of a StreamFixer (stream/fixer.ts). */
export interface Fixer {
  push(text: string): string;
  end(): string;
  readonly summary: { events: number; deltas: number; dropped: number; ignored: number; fatal: number; wiped: number };
  readonly outcomes: Readonly<Record<Outcome, number>>;
  readonly unfixed: number;
  /** What it holds, approximately, in bytes: its mirror and its unfinished event. */
  readonly bytes: number;
  /** At the end: the lifecycle repair ended a run the stream left going (closeStream's `ended`). */
  readonly runEnded: boolean;
  /** The unfinished event's text (fixStream's `pending`, §14). */
  readonly pendingText: string;
  /** The input up to its first event when that is a RUN_STARTED ("" when not; undefined until it came): fixStream's `head`. */
  readonly headText: string | undefined;
}

/** Makes the fixer of one stream, `new StreamFixer(spec)`, handed over by whoever loaded the pipeline. */
export type NewFixer = (spec: FixerSpec) => Fixer;

/**
 * Where the pipeline comes from: `get` is undefined until it is loaded, `load` starts loading it, and
 * `loading` is the load in flight, if any, which settles (never rejects) once `get` has the pipeline or
 * the load failed and the next `load` may try again.
 */
export interface Pipeline {
  get(): NewFixer | undefined;
  load(): void;
  loading(): Promise<void> | undefined;
}

export interface StreamServiceOptions {
  /** maxStreams and streamIdleMs, and the state limits the baseline is held to (protocol/README.md §7, §14). */
  limits?: Partial<P.Limits>;
  pipeline: Pipeline;
  /** Milliseconds since an arbitrary origin; injectable, so that tests of idle streams need no wall clock. */
  now?: () => number;
  /** The run log, its key and the grace period (protocol/README.md §16); absent (`--store none`), `resume` is ignored and nothing can be rejoined. */
  resume?: ResumeOptions;
  /** Where a resumable run says it was cancelled. */
  log?: Log;
  /** --max-request-body: the request body a middleware keeps (classifyRequest's `bodyBytes`, §14). */
  maxRequestBody?: number;
}

/** One open stream: its fixer (made at its first part, once the pipeline is there) and what its current call found. */
interface Stream {
  readonly opts: FixerSpec;
  fixer: Fixer | undefined;
  /** The findings of the current call, by outcome. */
  readonly counts: Record<Outcome, number>;
  /** The findings of the current call, each (NO_FINDINGS until there is one). */
  findings: P.StreamFinding[];
  /** Its run in the run log, when opened with `resume` (§16). */
  recorder: Recorder | undefined;
  /** detachStream was called: its client left, and fixStream's replies say whether to cancel. */
  detached: boolean;
  /** The run is cancelled (or could never go on detached): the middleware is to cancel the app. */
  cancel: boolean;
  /** fixStream's `head` was given (or there is none to give). */
  headSaid: boolean;
  /** The connection that opened it, on a shared sidecar (protocol/README.md §2): its end closes the stream. */
  readonly owner: object | undefined;
}

/**
 * No findings: shared, never written to (a call's array is made at its first
 * finding). Frozen as a statement, not through freeze's return, whose readonly
 * type the results' mutable arrays would not take.
 */
const NO_FINDINGS: P.StreamFinding[] = [];
Object.freeze(NO_FINDINGS);

const zero = (): Record<Outcome, number> => ({ passed: 0, mended: 0, discarded: 0, kept: 0 });

/** A stream's weight for the heap ceiling: its fixer's, or before its first part, its baseline's. */
const streamBytes = (s: Stream): number => s.fixer?.bytes ?? measure(s.opts.state ?? {}).bytes;

/**
 * The stream methods of protocol/README.md §14 over a StreamStore: `fix`'s
 * pipeline (stream/fixer.ts) fed part by part by a server middleware, with
 * typed params and results and failures as CallError values. Knows nothing
 * of JSON-RPC: the RPC layer checks params against the schema, calls this,
 * and encodes.
 */
export class StreamService {
  private readonly store: StreamStore<Stream>;
  private readonly limits: Readonly<P.Limits>;
  private readonly pipeline: Pipeline;
  private readonly now: () => number;
  private readonly resume: ResumeOptions | undefined;
  private readonly log: Log | undefined;
  private readonly maxRequestBody: number;
  /** The rejoin methods (§16). */
  readonly rejoins: Rejoins;

  constructor(options: StreamServiceOptions) {
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.store = new StreamStore({ maxStreams: this.limits.maxStreams, idleMs: this.limits.streamIdleMs });
    // A resumable stream the store lets go (evicted, idle, shed) will get no more parts: its run ends as cancelled, so its readers end too.
    this.store.dropped = (s) => s.recorder?.finish("cancelled");
    this.pipeline = options.pipeline;
    this.now = options.now ?? (() => performance.now());
    this.resume = options.resume;
    this.log = options.log;
    this.maxRequestBody = options.maxRequestBody ?? DEFAULT_MAX_REQUEST_BODY;
    this.rejoins = new Rejoins(options.resume, { maxStreams: this.limits.maxStreams, idleMs: this.limits.streamIdleMs }, this.now);
  }

  /** What a request is to a middleware (§14, §16): handled or not, a rejoin, a reload or the app's. */
  classifyRequest(p: P.ClassifyRequestParams): CallResult<P.ClassifyRequestResult> {
    return classifyRequest(p, this.resume !== undefined, { maxRequestBody: this.maxRequestBody, maxMessageBytes: this.limits.maxMessageBytes });
  }

  /**
   * openStream, in either form: the request form (a middleware's raw request and response head, §14)
   * is read by the stream edge into the earlier form's terms, and answered with the head to write.
   */
  openStream(p: P.OpenStreamParams & { request?: undefined; response?: undefined }, owner?: object): CallResult<Opened>;
  openStream(p: P.OpenStreamParams, owner?: object): CallResult<P.OpenStreamResult>;
  openStream(p: P.OpenStreamParams, owner?: object): CallResult<P.OpenStreamResult> {
    if (p.request === undefined && p.response === undefined) return this.open(p, undefined, owner);
    const edge = openFromRequest(p, this.resume !== undefined);
    if (!edge.ok) return edge;
    if ("pass" in edge.value) return ok({ pass: edge.value.pass });
    const opened = this.open(edge.value.params, edge.value.run, owner);
    if (!opened.ok) return opened;
    return ok({ ...opened.value, ...edgeResult(edge.value, p.response as P.HttpResponseHead, opened.value.run !== undefined) });
  }

  private open(p: P.OpenStreamParams, run: { threadId: string; runId: string } | undefined, owner: object | undefined): CallResult<Opened> {
    if (typeof p.resume === "boolean") return err(invalidParams("/resume", "INVALID_VALUE", "resume: true or false only in the request form (with request and response); otherwise the run to file (protocol/README.md §16)"));
    const resumeRun = p.resume;
    // protocol/README.md §11 and §14: the baseline is an object, held to a thread's state limits.
    if (p.state !== undefined && !isObject(p.state)) return err(invalidParams("/state", "ROOT_NOT_OBJECT", "state must be a JSON object, RunAgentInput.state (protocol/README.md §11); leave it out when the request has none"));
    const over = stateOverLimit(p.state ?? {}, this.limits);
    if (over) return err(limitExceeded(over.limit, over.max, over.actual));
    // As `fix --own` reads it (edge/own.ts).
    const owned = ownedMembers(p.own ?? []);
    if (!owned.ok) return err(invalidParams(`/own/${owned.error.index}`, owned.error.reason, `own: ${owned.error.message}`));
    const own = owned.value;
    // §16: a run's events get SSE ids; NDJSON has no field to carry one.
    if (resumeRun !== undefined && ((resumeRun.requestHeaders !== undefined && (resumeRun.authorization ?? resumeRun.cookie) !== undefined) || (resumeRun.responseHeaders !== undefined && resumeRun.headers !== undefined))) {
      return err(invalidParams("/resume", "CONFLICTING_PARAMS", "resume: give requestHeaders and responseHeaders, or the earlier authorization, cookie and headers, not both"));
    }
    if (resumeRun !== undefined && p.framing === "ndjson") return err(invalidParams("/resume", "CONFLICTING_PARAMS", "resume: only an SSE stream (framing sse) can be resumed; NDJSON has no event ids. Leave resume out for this stream"));
    const policy = { own, snapshots: p.snapshots ?? "pass", joinKeys: p.joinKeys ?? false, lifecycle: p.lifecycle ?? "pass" };
    const counts = zero();
    const stream: Stream = {
      opts: {
        // The fixer copies the baseline into its mirror. Left out, it is not known (§13).
        ...(p.state !== undefined ? { state: p.state as JsonObject } : {}),
        ...(p.resync === true ? { resync: true } : {}),
        policy,
        ...(run ? { run } : {}),
        // A listener also makes the fixer work out its verdict on each mended delta, so the findings are fix --report's.
        onFinding: (f) => {
          counts[f.outcome]++;
          if (stream.findings === NO_FINDINGS) stream.findings = [];
          stream.findings.push(f);
        },
        ...(p.framing !== undefined ? { framing: p.framing } : resumeRun !== undefined && this.resume ? { framing: "sse" as const } : {}),
      },
      fixer: undefined,
      counts,
      findings: NO_FINDINGS,
      recorder: undefined,
      detached: false,
      cancel: false,
      headSaid: false,
      owner,
    };
    // A reload's prelude starts from the request's state: {} when it has none.
    const filed = resumeRun !== undefined && this.resume ? this.record(this.resume, resumeRun, (p.state ?? {}) as JsonObject, () => void (stream.cancel = true)) : undefined;
    const recorder = filed?.recorder;
    stream.recorder = recorder;
    // The transport holds back the messages read after this one until the load settles (loading()), so
    // a part sent right behind its openStream, in the same read, still finds the pipeline loaded.
    this.pipeline.load();
    // Node's crypto module with it (ids, the credential hash): a middleware's warm-up stream at start
    // then pays for it, not the first resumable stream.
    if (this.resume) nodeCrypto();
    const streamId = this.store.add(stream, this.now());
    return ok(filed ? { streamId, run: filed.recorder.run, opening: filed.recorder.openingBlock, headers: filed.headers } : { streamId });
  }

  /**
   * Files a stream as a run in the log (§16): who may rejoin it, and what a reload replays, read from
   * the request's and the response's headers by the resume edge's rules (resume/edge.ts), as the
   * proxy reads them; and the headers the middleware adds to its response's head (the announcement).
   */
  private record(resume: ResumeOptions, r: P.ResumeRun, state: JsonObject, cancel: () => void): { recorder: Recorder; headers: Record<string, string> } {
    const request = r.requestHeaders ? headerMap(r.requestHeaders as [string, string][]) : { ...(r.authorization !== undefined ? { authorization: r.authorization } : {}), ...(r.cookie !== undefined ? { cookie: r.cookie } : {}) };
    const response = r.responseHeaders ? headerMap(r.responseHeaders as [string, string][]) : (r.headers ?? { "content-type": "text/event-stream" });
    const recorder = new Recorder(resume.log, resume.graceMs, cancel, this.log);
    const start = runStart(resume, { threadId: r.threadId, request: { method: "POST", path: r.path, headers: request }, status: 200, response, state, messages: r.messages ?? [], opening: recorder.opening });
    resume.log.begin(recorder.run, start).catch((e: unknown) => this.log?.error({ err: String(e), run: recorder.run }, "the run log could not open this run; it cannot be resumed"));
    return { recorder, headers: announcement(response) };
  }

  /** The pipeline's load in flight, if any: the transport handles no further message until it settles. */
  loading(): Promise<void> | undefined {
    return this.pipeline.loading();
  }

  fixStream(p: P.FixStreamParams): CallResult<P.FixStreamResult> {
    const found = this.store.get(p.streamId, this.now());
    if (!found.ok) return err(unknownStream(p.streamId, found.error));
    const stream = found.value;
    if (!this.ready(stream)) return err(unknownStream(p.streamId, "loading"));
    const fixed = this.run(p.streamId, stream, (fixer) => fixer.push(p.text));
    const text = stream.recorder ? stream.recorder.part(fixed) : fixed;
    const c = stream.counts;
    const tail = this.tail(stream);
    // Detached (§16): the text went to the run log only; the reply says whether to cancel the app. A run
    // whose log takes no more (past --run-log-bytes, an event past the client's buffer) has nothing to go on for.
    if (stream.detached) return ok({ text: "", findings: stream.findings, passed: c.passed, mended: c.mended, discarded: c.discarded, kept: c.kept, ...tail, cancel: stream.cancel || stream.recorder?.ended !== false });
    return ok({ text, findings: stream.findings, passed: c.passed, mended: c.mended, discarded: c.discarded, kept: c.kept, ...tail });
  }

  /**
   * What a middleware keeps to fail open with (§14): the UTF-8 bytes of the text it gave that no
   * reply answered for, and once, the stream's head when it starts with a RUN_STARTED.
   */
  private tail(stream: Stream): { pending: number; head?: number } {
    const fixer = stream.fixer as Fixer;
    const pending = Buffer.byteLength(fixer.pendingText);
    if (stream.headSaid) return { pending };
    const head = fixer.headText;
    if (head === undefined) return { pending };
    stream.headSaid = true;
    return head === "" ? { pending } : { pending, head: Buffer.byteLength(head) };
  }

  /**
   * The middleware's client left mid-run (§16). A resumable run goes on, detached, for the grace
   * period; any other stream is to be cancelled at once (graceMs 0), as before resume.
   */
  detachStream(p: P.DetachStreamParams): CallResult<P.DetachStreamResult> {
    const found = this.store.get(p.streamId, this.now());
    if (!found.ok) return err(unknownStream(p.streamId, found.error));
    const stream = found.value;
    stream.detached = true;
    if (stream.recorder?.detach() && !stream.cancel) return ok({ graceMs: this.resume?.graceMs ?? 0 });
    stream.cancel = true;
    return ok({ graceMs: 0 });
  }

  closeStream(p: P.CloseStreamParams): CallResult<P.CloseStreamResult> {
    const open = this.store.get(p.streamId, this.now());
    if (open.ok && !this.ready(open.value)) return err(unknownStream(p.streamId, "loading"));
    const found = this.store.close(p.streamId, this.now());
    if (!found.ok) return err(unknownStream(p.streamId, found.error));
    const stream = found.value;
    let summary: P.StreamSummary | undefined;
    const recorder = stream.recorder;
    let ended = false;
    let text = this.run(undefined, stream, (fixer) => {
      const out = fixer.end();
      ended = fixer.runEnded;
      const s = fixer.summary;
      const o = fixer.outcomes;
      summary = { events: s.events, deltas: s.deltas, dropped: s.dropped, ignored: s.ignored, fatal: s.fatal, wiped: s.wiped, passed: o.passed, mended: o.mended, discarded: o.discarded, kept: o.kept, unfixed: fixer.unfixed };
      return out;
    });
    if (recorder) {
      // §16: the run ends as the app's response ended; a response that broke off ends it cancelled, so a rejoin breaks too.
      // A run the lifecycle repair ended (RUN_ERROR) is whole: it is logged as it was sent, and a rejoin ends with it.
      if (p.broken === true && !ended) recorder.finish("cancelled");
      text = recorder.part(text) + recorder.end();
    }
    return ok({ text: stream.detached ? "" : text, findings: stream.findings, summary: summary as P.StreamSummary, ...(ended ? { ended } : {}) });
  }

  /**
   * Closes least recently used streams, the most recent one always kept,
   * until what they held adds up to `bytes`: what the heap ceiling does once
   * no thread is left to evict (protocol/README.md §7). A call for one of them
   * then fails as for a stream `--max-streams` evicted. Returns their ids.
   */
  shed(bytes: number): string[] {
    return this.store.shed(bytes, streamBytes);
  }

  /** What the open streams hold, approximately, in bytes (each as streamBytes counts it). */
  stateBytes(): number {
    return this.store.bytes(streamBytes);
  }

  /** Open streams, and streams closed by either limit (stats, protocol/README.md §6), idle ones closed first; the run log's counts and the open reads (§16). */
  stats(): StreamCounts {
    this.store.sweep(this.now());
    const runs = this.resume?.log.stats() ?? { runs: 0, bytes: 0, evicted: 0 };
    return { streams: this.store.size, streamsEvicted: this.store.evicted, runs: runs.runs, runBytes: runs.bytes, runsEvicted: runs.evicted, reads: this.rejoins.open };
  }

  /** At exit, once every reply is written: the reads stop following, and the run log closes (Redis's connections would hold the process open). */
  async close(): Promise<void> {
    this.rejoins.closeAll();
    await this.resume?.log.close();
  }

  /** The rejoin methods' waiting reads (`owner`'s, when given) answer now: the transport is shutting down (§2). */
  wake(owner?: object): void {
    this.rejoins.wakeAll(owner);
  }

  /**
   * A connection to a shared sidecar went away (§2): the streams and reads it opened are closed, as a
   * dead stdio client's go with its sidecar. A resumable run among them ends cancelled, so its
   * rejoins end too: no more of it can come.
   */
  release(owner: object): void {
    for (const stream of this.store.closeWhere((s) => s.owner === owner)) stream.recorder?.finish("cancelled");
    this.rejoins.release(owner);
  }

  /**
   * Whether the stream's fixer is made or can be: false only for a part in
   * the same JSON-RPC batch as the first openStream, before the pipeline's
   * load has settled (the transport holds every later message, §14).
   */
  private ready(stream: Stream): boolean {
    return stream.fixer !== undefined || this.pipeline.get() !== undefined;
  }

  /**
   * Runs one call's work on the stream's fixer, made at its first call. A
   * fixer that throws is a bug: the stream is closed (`id` given), so that no
   * later part meets a fixer in an unknown state, and the error goes on to
   * the RPC layer, which answers -32603 and logs it; the middleware then
   * sends the rest of the response as it is.
   */
  private run(id: string | undefined, stream: Stream, work: (fixer: Fixer) => string): string {
    const c = stream.counts;
    c.passed = c.mended = c.discarded = c.kept = 0;
    stream.findings = NO_FINDINGS;
    try {
      if (stream.fixer === undefined) {
        const make = this.pipeline.get();
        if (make === undefined) throw new Error("the stream pipeline is not loaded: the transport should have held this message until loading() settled");
        stream.fixer = make(stream.opts);
        // The fixer's mirror is its own copy: the baseline is not held twice.
        if (stream.opts.state !== undefined) stream.opts.state = {};
      }
      return work(stream.fixer);
    } catch (e) {
      if (id !== undefined) this.store.close(id, this.now());
      stream.recorder?.finish("cancelled");
      throw e;
    }
  }
}
