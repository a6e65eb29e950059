import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Readable, Transform } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { JsonObject } from "../core/index.js";
import type { Log } from "../log.js";
import type { Policy } from "../stream/client.js";
import { hasKind, noKinds, noOutcomes, type Kind, type Outcome } from "../stream/findings.js";
import { StreamFixer, type Observed } from "../stream/fixer.js";
import type { Framing } from "../edge/response.js";
import type { Baseline } from "./baseline.js";
import { endToEnd } from "./headers.js";
import type { Recorder } from "../resume/recorder.js";

/** Whether a Content-Type is AG-UI's protobuf framing, which the fixer cannot read. */
export const isProtobuf = (type: string | undefined): boolean => type !== undefined && /^\s*application\/vnd\.ag-ui\.event\+proto\s*(;|$)/i.test(type);

/** Decoders for the content codings the fixer can see through; any other coding is passed untouched. */
const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  "x-gzip": createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/** Whether the stream can be fixed: it is not encoded, or in a coding we can decode. */
export function canDecode(encoding: string | undefined): boolean {
  return encoding === undefined || encoding === "identity" || DECODERS[encoding.trim().toLowerCase()] !== undefined;
}

/** The findings of one stream, counted by kind (what the client would do with the event as sent) and by outcome (what the proxy did). */
export interface FindingCounts {
  kinds: Record<Kind, number>;
  outcomes: Record<Outcome, number>;
}

/**
 * Who watches the streams the proxy fixes (`--inspect`): told of each stream
 * as it opens, with the state the client holds before it, then of each event
 * once the pipeline is done with it. Without one the pipeline has no
 * observer, and costs what it did.
 */
export interface StreamWatcher {
  open(meta: { method: string; path: string }, baseline: JsonObject): { observe: (e: Observed) => void; close: (complete: boolean) => void };
}

/**
 * Sends an upstream event stream to the client through a StreamFixer whose
 * mirror starts at the request's baseline, with the proxy's repair policy.
 * The fixed stream is sent decoded (without Content-Encoding) and without
 * Content-Length, since fixing changes its length. Back-pressure: the
 * upstream is paused while the client's socket is full. Resolves when the
 * client has the whole stream, or when either side went away (`complete` false).
 *
 * With `record` (resume, protocol/README.md §16), every event goes through the run's Recorder, which
 * gives it its id and logs it; a client that leaves is then detached (the Recorder says so) rather
 * than the end of the stream: the upstream is read on into the log, and the promise resolves when
 * the upstream ends or fails.
 */
export async function fixStream(upstream: IncomingMessage, framing: Framing, res: ServerResponse, baseline: Promise<Baseline>, log: Log, policy?: Policy, watch?: { watcher: StreamWatcher; method: string; path: string }, record?: (b: Baseline, headers: OutgoingHttpHeaders) => Recorder): Promise<{ complete: boolean; counts: FindingCounts }> {
  const counts: FindingCounts = { kinds: noKinds(), outcomes: noOutcomes() };
  const base = await baseline;
  const { state, note } = base;
  // While the body was still arriving, the client may have left (or a 502 gone out).
  if (res.headersSent || res.destroyed) return { complete: false, counts };
  if (note !== undefined) log.warn({ note }, "the request's RunAgentInput.state could not be read; the mirror starts at {}");
  // Opened before the fixer, which works on the state from here on.
  const watching = watch?.watcher.open({ method: watch.method, path: watch.path }, state);
  const fixer = new StreamFixer({
    // A baseline that could not be read is not known: {} stands in for it (§13, SNAPSHOT_REPLACES_UNKNOWN).
    ...(note === undefined ? { state } : {}),
    ...(policy ? { policy } : {}),
    framing,
    ...(watching ? { onEvent: watching.observe } : {}),
    onFinding: (f) => {
      if (hasKind(f)) counts.kinds[f.kind]++;
      counts.outcomes[f.outcome]++;
      // One line per finding at debug only: a sloppy upstream can make one per event.
      if (hasKind(f) && f.kind === "fatal" && f.outcome === "passed") log.warn({ finding: f }, "event stream finding");
      else log.debug({ finding: f }, "event stream finding");
    },
  });
  const encoding = upstream.headers["content-encoding"]?.trim().toLowerCase();
  const decoder = encoding !== undefined && encoding !== "identity" ? DECODERS[encoding] : undefined;
  const source: Readable = decoder ? upstream.pipe(decoder()) : upstream;
  const headers = endToEnd(upstream.headers, ["content-length", "content-encoding"]);
  const recorder = record?.(base, headers);
  res.writeHead(upstream.statusCode ?? 200, upstream.statusMessage, headers);
  // Many proxies and browsers wait for the first bytes before they show a
  // stream; the headers go now rather than with the first event.
  res.flushHeaders();
  // §16: the opening id block goes right behind them, before the upstream's first event, however slow.
  if (recorder) res.write(recorder.openingBlock);

  return new Promise((resolve) => {
    let settled = false;
    const done = (complete: boolean) => {
      if (settled) return;
      settled = true;
      watching?.close(complete);
      resolve({ complete, counts });
    };
    // A detached run's text goes only to the log (the recorder): nobody reads this response any more.
    const gone = () => res.destroyed || res.writableEnded;
    const send = (text: string) => {
      if (text !== "" && !gone() && !res.write(text)) {
        source.pause();
        res.once("drain", () => source.resume());
      }
    };
    source.on("data", (chunk: Buffer) => {
      try {
        send(recorder ? recorder.items(fixer.pushEach(chunk)) : fixer.push(chunk));
      } catch (e) {
        fail(e as Error);
      }
    });
    source.on("end", () => {
      try {
        const text = recorder ? recorder.items(fixer.endEach()) + recorder.end() : fixer.end();
        if (gone()) done(false);
        else res.end(text, () => done(true));
      } catch (e) {
        fail(e as Error);
      }
    });
    // The upstream (or the decoder) broke off mid-stream: the client must see
    // a broken stream, not a clean end that would look like a finished run.
    const fail = (e: Error) => {
      if (settled) return;
      const err = { message: e.message, code: (e as NodeJS.ErrnoException).code };
      // Lifecycle repair (protocol/README.md §13): a run the upstream broke off inside ends as a failed one, what
      // was open closed and RUN_ERROR INCOMPLETE_STREAM sent, and the client's response ends cleanly, at once.
      const last = ended();
      if (last !== undefined && !gone()) {
        log.warn({ err }, "the event stream broke off inside its run; ended it with RUN_ERROR INCOMPLETE_STREAM");
        settled = true;
        res.end(last, () => {
          watching?.close(false);
          resolve({ complete: false, counts });
        });
        return;
      }
      recorder?.finish("cancelled");
      log.error({ err }, "the event stream broke off mid-stream; closing the client's connection so it does not look finished");
      res.destroy();
      done(false);
    };
    /** The text that ends a run the stream stopped inside (the fixer's end), or undefined when it ended none or cannot. */
    const ended = (): string | undefined => {
      try {
        const text = recorder ? recorder.items(fixer.endEach()) : fixer.end();
        if (!fixer.runEnded) return undefined;
        return recorder ? text + recorder.end() : text;
      } catch {
        return undefined;
      }
    };
    source.on("error", fail);
    if (source !== upstream) upstream.on("error", fail);
    upstream.on("close", () => {
      if (!upstream.complete) fail(new Error("the upstream closed the stream before its end"));
    });
    res.on("close", () => {
      // Detached (server.ts asked the recorder first): read on into the log, never held back for a socket that is gone.
      if (recorder?.detached && !res.writableFinished) return void source.resume();
      done(res.writableFinished);
    });
  });
}
