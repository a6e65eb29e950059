/**
 * `resumableFetch`: a fetch for @ag-ui/client's HttpAgent that survives a dropped connection
 * (protocol/README.md §16). Browser-safe: the Fetch and Streams APIs only.
 *
 * It hands the client one body that it builds itself, passing on only whole SSE events (a block
 * ends at a blank line: the servers that stamp ids write LF line ends) and remembering the last
 * `id:` it passed, a block's without data too: the answer's opening block is an id alone, so a
 * connection cut before the first event still leaves an id to rejoin from. A rejoin's answer has no
 * opening block of its own (it goes on with the same stream), so nothing is spliced twice. When the body fails mid-stream, or ends before the run did, it sends the original
 * request again with `Last-Event-ID` and carries on with the new body where the last whole event
 * left off, so the client's pipeline (`verifyEvents` included) sees one unbroken stream with no event
 * twice and none missing. Retries are bounded, with backoff; when it gives up, the body fails with
 * the original error.
 */

export interface ResumeOptions {
  /** The fetch underneath (default: the global one). */
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** How many times to try to rejoin one drop (default 5). */
  retries?: number;
  /** The wait before the first try, doubled for each next one (default 250 ms). */
  backoffMs?: number;
  /** The longest wait between tries (default 5,000 ms). */
  maxBackoffMs?: number;
  /** Told of each try, before it is sent. */
  onRetry?: (info: { attempt: number; lastEventId: string; error: unknown }) => void;
}

/** @ag-ui/client's HttpAgentFetchFn. */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

const LF = 10;

/** Whether a response is an event stream a rejoin can continue. */
const isEventStream = (r: Response): boolean => /^\s*text\/event-stream\s*(;|$)/i.test(r.headers.get("content-type") ?? "");

/** The end of the last whole SSE event in `buf` (just past its blank line), or 0. */
function lastBoundary(buf: Uint8Array): number {
  for (let i = buf.length - 1; i > 0; i--) if (buf[i] === LF && buf[i - 1] === LF) return i + 1;
  return 0;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/**
 * What the whole blocks in `text` tell: the last id among them, and whether the last event ended the
 * run. HTML Standard, "Interpreting an event stream": an `id` field sets the last event ID buffer
 * (unless its value holds NULL), and every dispatch sets the last event ID from it, even one whose
 * data buffer is empty and so dispatches no event: a block with an id and no data (the opening block,
 * protocol/README.md §16) gives the id all the same. An empty id means none (nothing to send).
 */
function readEvents(text: string, state: { lastId: string | undefined; ended: boolean }): void {
  for (const block of text.split("\n\n")) {
    if (block === "") continue;
    let data = "";
    for (const line of block.split("\n")) {
      // A field is "name" alone or "name:value"; one space after the colon is dropped.
      if (line === "id" || line.startsWith("id:")) {
        const id = line.slice(line.startsWith("id: ") ? 4 : 3);
        if (!id.includes("\0")) state.lastId = id === "" ? undefined : id;
      } else if (line.startsWith("data:")) data += line.slice(line.startsWith("data: ") ? 6 : 5);
    }
    if (data !== "") state.ended = /"type"\s*:\s*"RUN_(FINISHED|ERROR)"/.test(data);
  }
}

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
    // Only an event stream whose request can be sent again is resumable.
    if (!response.ok || !response.body || !isEventStream(response) || (init.body != null && typeof init.body !== "string")) return response;
    const state = { lastId: undefined as string | undefined, ended: false };
    const decoder = new TextDecoder();
    let reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
    let held: Uint8Array = new Uint8Array(0);
    // The last id a rejoin after a clean end started from.
    let politeFrom: string | undefined;
    // Whether any of the body came from a rejoin.
    let rejoined = false;

    /** The body again, from after the last whole event; undefined when no rejoin was had. */
    const rejoin = async (error: unknown): Promise<ReadableStreamDefaultReader<Uint8Array> | undefined> => {
      const lastEventId = state.lastId;
      if (lastEventId === undefined) return undefined;
      for (let attempt = 1; attempt <= retries; attempt++) {
        await sleep(Math.min(first * 2 ** (attempt - 1), most), init.signal);
        options.onRetry?.({ attempt, lastEventId, error });
        const headers = new Headers(init.headers);
        headers.set("Last-Event-ID", lastEventId);
        let again: Response;
        try {
          again = await base(url, { ...init, headers });
        } catch (e) {
          if (init.signal?.aborted) throw e;
          continue;
        }
        // 410: the server does not know the id (or it is not ours to rejoin): nothing more to try.
        if (!again.ok || !again.body || !isEventStream(again)) return undefined;
        return again.body.getReader();
      }
      return undefined;
    };

    const body = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        for (;;) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch (error) {
            if (init.signal?.aborted) throw error;
            held = new Uint8Array(0);
            const next = await rejoin(error);
            if (!next) throw error;
            rejoined = true;
            reader = next;
            continue;
          }
          if (chunk.done) {
            // Ended before the run did (a proxy or balancer closing politely): rejoin, unless the last
            // rejoin of this kind brought nothing new, so that a run that ended unfinished is not asked for again and again.
            if (!state.ended && state.lastId !== undefined && state.lastId !== politeFrom) {
              politeFrom = state.lastId;
              held = new Uint8Array(0);
              const next = await rejoin(new Error("the stream ended before the run did")).catch(() => undefined);
              if (next) {
                rejoined = true;
                reader = next;
                continue;
              }
            }
            // A stream we rejoined that still ends before the run did was cut where no rejoin can reach:
            // that is an error the client must see, not a run that looks complete.
            if (rejoined && !state.ended) throw new Error("the event stream ended before its run did, and no rejoin could continue it");
            if (held.length > 0) controller.enqueue(held);
            controller.close();
            return;
          }
          held = concat(held, chunk.value);
          const end = lastBoundary(held);
          if (end === 0) continue;
          const whole = held.slice(0, end);
          held = held.slice(end);
          readEvents(decoder.decode(whole), state);
          controller.enqueue(whole);
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
