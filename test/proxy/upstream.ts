import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** One request as the upstream received it. */
export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  res: ServerResponse;
  /** Resolves when the upstream's response is closed: `finished` false means the peer went away first. */
  closed: Promise<{ finished: boolean }>;
}

export type Handler = (seen: Seen, req: IncomingMessage) => void;

/**
 * An AG-UI endpoint written in the test, on node:http in the test process:
 * every request is recorded (with its whole body, read before the handler
 * runs) and handed to the route whose prefix matches its path.
 */
export class TestUpstream {
  readonly seen: Seen[] = [];
  private readonly waiting: ((s: Seen) => void)[] = [];

  private readonly server: http.Server;
  private origin = "";

  private constructor(routes: Record<string, Handler>) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const closed = new Promise<{ finished: boolean }>((resolve) => res.on("close", () => resolve({ finished: res.writableFinished })));
        const seen: Seen = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks), res, closed };
        this.record(seen);
        const path = (req.url ?? "/").split("?")[0] as string;
        const route = Object.keys(routes).find((p) => path === p || path.startsWith(`${p}/`));
        if (route) (routes[route] as Handler)(seen, req);
        else res.writeHead(404).end();
      });
    });
  }

  static async start(routes: Record<string, Handler>): Promise<TestUpstream> {
    const self = new TestUpstream(routes);
    await new Promise<void>((resolve) => self.server.listen(0, "127.0.0.1", resolve));
    self.origin = `http://127.0.0.1:${(self.server.address() as AddressInfo).port}`;
    return self;
  }

  /** The upstream's origin, http://127.0.0.1:PORT. */
  get url(): string {
    return this.origin;
  }

  private record(s: Seen): void {
    this.seen.push(s);
    for (const w of this.waiting.splice(0)) w(s);
  }

  /** The next request to arrive: call it before sending the request. */
  nextRequest(): Promise<Seen> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export { freePort } from "../../scripts/harness/ports.js";

/** One SSE event as AG-UI servers write it. */
export const sse = (event: unknown): string => `data: ${JSON.stringify(event)}\n\n`;

/** Writes `text` in slices of `size` bytes, cutting events (and UTF-8 sequences) anywhere, as TCP may. */
export function writeSliced(res: ServerResponse, bytes: Buffer, size: number): Buffer[] {
  const slices: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) slices.push(bytes.subarray(i, i + size));
  for (const s of slices) res.write(s);
  return slices;
}
