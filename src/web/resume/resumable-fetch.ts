import { RESUMABLE_HEADER, RESUMABLE_VALUE } from "./announce.js";
import { EventBlocks } from "./sse-blocks.js";

/**
 * `resumableFetch`: a fetch for @ag-ui/client's HttpAgent that survives a dropped connection
 * (protocol/README.md §16). Browser-safe: the Fetch and Streams APIs only.
 *
 * Only an answer that announced resume (`ag-ui-resumable: true`) is ever rejoined: a rejoin sends the
 * POST again, and a server without resume would run the agent again. Any other answer is handed to
 * the client as it came. For an announced one it hands the client one body that it builds itself,
 * passing on only whole SSE events (sse-blocks.ts: CRLF, LF and CR line ends alike, the bytes
 * unchanged) and remembering the last id it passed, a block's without data too: the answer's opening
 * block is an id alone, so a connection cut before the first event still leaves an id to rejoin from.
 * When the body fails mid-stream, or ends before the run did, it sends the original request again
 * with `Last-Event-ID` and carries on with the new body where the last whole event left off, so the
 * client's pipeline (`verifyEvents` included) sees one unbroken stream with no event twice and none
 * missing.
 *
 * It stops after `retries` rejoins in a row that brought no new event (a run that ended broken is cut
 * at the same place every time), and at once when a rejoin is refused (410: the run is unknown, gone,
 * or ended broken with nothing after the id) or answered by something that is not the run's stream.
 * It then fails with the error that began those rejoins, the one the client would have seen without it.
 */

export interface ResumeOptions {
  /** The fetch underneath (default: the global one). */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** How many rejoins in a row may bring no new event before it gives up (default 5). */
  retries?: number;
  /** The wait before the first of those rejoins, doubled for each next one (default 250 ms). */
  backoffMs?: number;
  /** The longest wait between rejoins (default 5,000 ms). */
  maxBackoffMs?: number;
  /** Told of each rejoin before it is sent: `attempt` counts those in a row with no new event (1 to `retries`), `error` is the one that began them. */
  onRetry?: (info: { attempt: number; lastEventId: string; error: unknown }) => void;
}

/** @ag-ui/client's HttpAgentFetchFn. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

/** Whether a response is an event stream a rejoin can continue. */
const isEventStream = (r: Response): boolean => /^\s*text\/event-stream\s*(;|$)/i.test(r.headers.get("content-type") ?? "");

/**
 * Whether the server announced resume for this answer. Headers.get joins a repeated header with ", "
 * (a proxy in front of a middleware may both set it): every value must say so.
 */
function announced(r: Response): boolean {
  const value = r.headers.get(RESUMABLE_HEADER);
  return value !== null && value.split(",").every((v) => v.trim().toLowerCase() === RESUMABLE_VALUE);
}

/** A rejoin's answer worth trying again: the way there failed (a gateway, a server restarting, a rate limit), not the run. */
const transient = (status: number): boolean => status === 429 || status === 502 || status === 503 || status === 504;

/** Why a body stopped before its run ended: a failure, or a clean end (a proxy or balancer closing politely). */
type Stop = { error: unknown; clean: boolean };
const CLEAN_END = "the event stream ended before its run did";

const sleep = (ms: number, signal: AbortSignal | null | undefined): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), reject(signal.reason as Error)), { once: true });
  });

export function resumableFetch(options: ResumeOptions = {}): FetchFn {
  const base: FetchFn = options.fetch ?? ((url, init) => fetch(url, init));
  const retries = options.retries ?? 5;
  const first = options.backoffMs ?? 250;
  const most = options.maxBackoffMs ?? 5000;

  return async (url, init) => {
    const response = await base(url, init);
    // Only an announced event stream whose request can be sent again is resumable; anything else is the client's as it came.
    if (!response.ok || !response.body || !isEventStream(response) || !announced(response) || (init.body != null && typeof init.body !== "string")) return response;
    const blocks = new EventBlocks();
    let reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
    // Rejoins in a row that brought no new event, and the stop that began them.
    let fruitless = 0;
    let began: Stop | undefined;
    // Whether any of the body came from a rejoin.
    let rejoined = false;

    /** The body again, from after the last whole event; undefined when there is none to have. */
    const rejoin = async (): Promise<ReadableStreamDefaultReader<Uint8Array> | undefined> => {
      for (;;) {
        const lastEventId = blocks.lastId;
        if (lastEventId === undefined || fruitless >= retries) return undefined;
        fruitless++;
        await sleep(Math.min(first * 2 ** (fruitless - 1), most), init.signal);
        options.onRetry?.({ attempt: fruitless, lastEventId, error: began?.error });
        const headers = new Headers(init.headers);
        headers.set("Last-Event-ID", lastEventId);
        let again: Response;
        try {
          again = await base(url, { ...init, headers });
        } catch (e) {
          if (init.signal?.aborted) throw e;
          continue;
        }
        // The run's stream again: announced, as every rejoin's answer is. An unannounced 200 is no
        // rejoin (a server that lost resume ran the request as a new one): never spliced, never asked again.
        if (again.ok && again.body && isEventStream(again) && announced(again)) return again.body.getReader();
        await again.body?.cancel().catch(() => undefined);
        if (!transient(again.status)) return undefined;
      }
    };

    /** What the client is told when no rejoin goes on: what it would have been told without resume. */
    const giveUp = (stop: Stop): Error | undefined => {
      if (!stop.clean) return stop.error as Error;
      // A clean end nothing was spliced onto stays a clean end; a stream we rejoined that still ends
      // before the run did was cut where no rejoin can reach: an error, not a run that looks complete.
      return rejoined ? new Error(`${CLEAN_END}, and no rejoin could continue it`) : undefined;
    };

    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        for (;;) {
          let stop: Stop;
          try {
            const chunk = await reader.read();
            if (!chunk.done) {
              const { whole, events } = blocks.push(chunk.value);
              // A new whole event: the rejoins so far got somewhere, and the count starts again.
              if (events > 0) {
                fruitless = 0;
                began = undefined;
              }
              if (whole.length === 0) continue;
              controller.enqueue(whole);
              return;
            }
            if (blocks.ended) {
              const rest = blocks.rest();
              if (rest.length > 0) controller.enqueue(rest);
              controller.close();
              return;
            }
            stop = { error: new Error(CLEAN_END), clean: true };
          } catch (error) {
            if (init.signal?.aborted) throw error;
            stop = { error, clean: false };
          }
          began ??= stop;
          const rest = blocks.rest();
          blocks.drop();
          const next = await rejoin();
          if (next) {
            rejoined = true;
            reader = next;
            continue;
          }
          const failure = giveUp(began);
          if (failure) throw failure;
          if (rest.length > 0) controller.enqueue(rest);
          controller.close();
          return;
        }
      },
      cancel: async (reason) => {
        await reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
