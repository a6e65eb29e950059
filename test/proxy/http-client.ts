import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http";
import type { JsonObject } from "../../src/core/index.js";

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: Buffer;
}

/** One request with node:http (fetch refuses hop-by-hop headers); resolves with the whole answer. */
export function request(url: string, opts: { method?: string; headers?: OutgoingHttpHeaders; body?: string | Buffer } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? "GET", headers: opts.headers ?? {}, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** A RunAgentInput as HttpAgent sends it. */
export const runInput = (state: JsonObject | undefined, runId = "r1"): string =>
  JSON.stringify({ threadId: "t1", runId, ...(state === undefined ? {} : { state }), messages: [], tools: [], context: [], forwardedProps: {} });

/** A request whose answer is read as it streams: its first event, the end (or the break), and a way to hang up. */
export interface OpenStream {
  status: Promise<number>;
  /** Resolves with the body as far as its first chunk that holds an event (a resumable answer's opening id block alone is none). */
  first: Promise<string>;
  /** Resolves when the answer ends (`complete`) or breaks off. */
  done: Promise<{ complete: boolean; body: string }>;
  /** Hangs up, as a browser tab that closes. */
  hangUp(): void;
}

export function openStream(url: string, body: string): OpenStream {
  let text = "";
  let firstChunk: (s: string) => void = () => undefined;
  let status: (n: number) => void = () => undefined;
  let finish: (r: { complete: boolean; body: string }) => void = () => undefined;
  const first = new Promise<string>((resolve) => (firstChunk = resolve));
  const statusP = new Promise<number>((resolve) => (status = resolve));
  const done = new Promise<{ complete: boolean; body: string }>((resolve) => (finish = resolve));
  const req = http.request(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, agent: false }, (res) => {
    status(res.statusCode ?? 0);
    res.setEncoding("utf8");
    res.on("data", (c: string) => {
      text += c;
      // A resumable answer's opening block (protocol/README.md §16) carries no event: wait for one.
      if (/^data/m.test(text)) firstChunk(text);
    });
    res.on("end", () => finish({ complete: true, body: text }));
    res.on("error", () => finish({ complete: false, body: text }));
    res.on("close", () => finish({ complete: res.complete, body: text }));
  });
  req.on("error", () => finish({ complete: false, body: text }));
  req.end(body);
  return { status: statusP, first, done, hangUp: () => req.destroy() };
}
