import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { RESUMABLE_HEADER } from "../../src/web/resume/announce.js";
import type { FetchFn } from "../../src/web/resume/index.js";

/**
 * A scripted SSE server on 127.0.0.1 for resumableFetch's tests (protocol/README.md §16): each request
 * is answered as the test's script says for its number and Last-Event-ID, and what each request's
 * Last-Event-ID was is kept in `asked`, so a test counts the requests the server saw.
 */

export interface Answer {
  /** Default 200. */
  status?: number;
  /** Whether the head carries `ag-ui-resumable: true` (default true). */
  announce?: boolean;
  /** More headers (they win over the defaults). */
  headers?: Record<string, string>;
  body: string;
  /** Whether the connection breaks once the body is written (default: the answer ends cleanly). */
  cut?: boolean;
}

/** How a request is answered: `n` counts requests from 1. */
export type Script = (n: number, lastEventId: string | undefined) => Answer;

const servers: http.Server[] = [];
/** Closes every server `serve` started (a test file's afterEach). */
export async function closeServers(): Promise<void> {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
}

export async function serve(script: Script): Promise<{ url: string; asked: (string | undefined)[] }> {
  const asked: (string | undefined)[] = [];
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const last = req.headers["last-event-id"];
      asked.push(typeof last === "string" ? last : undefined);
      const a = script(asked.length, typeof last === "string" ? last : undefined);
      const status = a.status ?? 200;
      res.writeHead(status, { "content-type": status === 200 ? "text/event-stream" : "application/json", ...(a.announce === false ? {} : { [RESUMABLE_HEADER]: "true" }), ...a.headers });
      if (!a.cut) return void res.end(a.body);
      // The body, then the connection breaks mid-answer (chunked, never terminated).
      res.write(a.body, () => setImmediate(() => res.socket?.destroy()));
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/agent`, asked };
}

/**
 * Node's fetch, each answer's body failing with an error that names its answer (`cut 1` for the
 * first answer's): the error a client ends with then tells which failure it is.
 */
export function labelled(): FetchFn {
  let n = 0;
  return async (url, init) => {
    const res = await fetch(url, init);
    const label = `cut ${++n}`;
    if (!res.body) return res;
    const reader = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      pull: async (c) => {
        try {
          const r = await reader.read();
          if (r.done) c.close();
          else c.enqueue(r.value);
        } catch {
          c.error(new Error(label));
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** A run whose text message has `n` deltas ("0 ", "1 ", …): its message's content tells which deltas the client applied, and how often. */
export const runOf = (n: number): unknown[] => [
  { type: "RUN_STARTED", threadId: "t", runId: "r" },
  { type: "TEXT_MESSAGE_START", messageId: "m", role: "assistant" },
  ...Array.from({ length: n }, (_, i) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: `${i} ` })),
  { type: "TEXT_MESSAGE_END", messageId: "m" },
  { type: "RUN_FINISHED", threadId: "t", runId: "r" },
];

/**
 * The answer as a server that stamps ids writes it: block 0 the opening block (an id alone, `R.0`),
 * then each event under the id `R.<i>`, every line ended by `eol` (`eol` and `blank`: the line end of
 * the fields and of the blank line, when a server mixes them).
 */
export function stamped(events: unknown[], eol = "\n", blank = eol): string[] {
  return [`id: R.0${eol}${blank}`, ...events.map((e, i) => `id: R.${i + 1}${eol}data: ${JSON.stringify(e)}${eol}${blank}`)];
}

/** The blocks after the one with this id: what a rejoin from it is answered with. */
export const after = (blocks: string[], id: string | undefined): string => blocks.slice(Number(id?.slice(2) ?? -1) + 1).join("");
