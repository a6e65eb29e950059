import { timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Log } from "../log.js";
import { pageHtml } from "./html.js";
import type { Inspector, StreamRecord } from "./store.js";

/**
 * The inspector's listener (`proxy --inspect HOST:PORT`, issue 25): apart
 * from the proxy's, so that the proxy's clients never reach it. It serves the
 * page (GET /), the data as JSON (GET /api/streams, GET /api/streams/:id;
 * protocol/README.md, "The inspector") and a live feed (GET /api/live, SSE).
 *
 * The data is users' state, which may hold anything: with a token, every
 * request must carry it as `Authorization: Bearer TOKEN` (RFC 6750 §2.1),
 * except that the page itself may take it once as `?token=`. Without one the
 * listener is loopback only (the command line refuses anything else), and it
 * answers only requests addressed to a loopback name, so a web page that
 * rebinds its own DNS name to 127.0.0.1 cannot read it.
 */

export interface InspectServerOptions {
  inspector: Inspector;
  log: Log;
  /** Required of every request when set. */
  token?: string;
}

/** How often the live feed tells the page what changed, at most: a stream of many small events becomes one message per tick. */
const TICK_MS = 250;

/** An error answer's body: `code` is stable (protocol/README.md, "The inspector"). */
interface Refusal {
  error: { code: "inspect_unauthorized" | "inspect_bad_host" | "inspect_not_found" | "inspect_method"; message: string };
}

const LOOPBACK_NAMES = /^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$/i;

export class InspectServer {
  readonly server: http.Server;
  private readonly token: Buffer | undefined;
  private readonly feeds = new Set<ServerResponse>();

  constructor(private readonly opts: InspectServerOptions) {
    this.token = opts.token === undefined ? undefined : Buffer.from(opts.token, "utf8");
    this.server = http.createServer({ requestTimeout: 0 }, (req, res) => this.handle(req, res));
  }

  async listen(host: string, port: number): Promise<AddressInfo> {
    this.server.listen(port, host);
    await once(this.server, "listening"); // rejects with the server's "error" (EADDRINUSE, EACCES) instead
    return this.server.address() as AddressInfo;
  }

  /** Ends the live feeds and stops listening. */
  async close(): Promise<void> {
    for (const res of this.feeds) res.end();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://inspector");
    res.setHeader("cache-control", "no-store");
    res.setHeader("x-content-type-options", "nosniff");
    // The page's address may carry ?token=: it must not leave in a Referer.
    res.setHeader("referrer-policy", "no-referrer");
    if (this.token === undefined && !LOOPBACK_NAMES.test(req.headers.host ?? "")) {
      return this.refuse(res, 403, "inspect_bad_host", "without --inspect-token the inspector answers only requests addressed to localhost, 127.0.0.1 or [::1]");
    }
    if (this.token !== undefined && !this.allowed(req, url)) {
      res.setHeader("www-authenticate", 'Bearer realm="agui-state inspector"');
      return this.refuse(res, 401, "inspect_unauthorized", "this inspector needs its token: send Authorization: Bearer TOKEN (the page may take it once as ?token=)");
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("allow", "GET, HEAD");
      return this.refuse(res, 405, "inspect_method", `the inspector is read-only; ${req.method ?? "?"} is not allowed`);
    }
    const { inspector } = this.opts;
    if (url.pathname === "/") {
      const { html, csp } = pageHtml();
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "content-security-policy": csp, "x-frame-options": "DENY" });
      return void res.end(html);
    }
    if (url.pathname === "/api/streams") return this.json(res, inspector.list());
    const m = /^\/api\/streams\/([^/]+)$/.exec(url.pathname);
    if (m) {
      const stream = inspector.get(decodeURIComponent(m[1] as string));
      if (!stream) return this.refuse(res, 404, "inspect_not_found", "no such stream: it never was, or it went to make room for newer ones");
      const after = Number(url.searchParams.get("after") ?? "0");
      const limit = Number(url.searchParams.get("limit") ?? "Infinity");
      return this.json(res, stream.detail(Number.isSafeInteger(after) && after > 0 ? after : 0, Number.isSafeInteger(limit) && limit > 0 ? limit : Infinity));
    }
    if (url.pathname === "/api/live") return this.live(req, res);
    this.refuse(res, 404, "inspect_not_found", `no such page: ${url.pathname}`);
  }

  /** The token, in constant time: from the Authorization header, or (the page only) from ?token=. */
  private allowed(req: IncomingMessage, url: URL): boolean {
    const header = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? "")?.[1];
    const given = header ?? (url.pathname === "/" ? (url.searchParams.get("token") ?? undefined) : undefined);
    if (given === undefined || this.token === undefined) return false;
    const bytes = Buffer.from(given, "utf8");
    return bytes.length === this.token.length && timingSafeEqual(bytes, this.token);
  }

  private json(res: ServerResponse, body: unknown, status = 200): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }

  private refuse(res: ServerResponse, status: number, code: Refusal["error"]["code"], message: string): void {
    const body: Refusal = { error: { code, message } };
    this.json(res, body, status);
  }

  /**
   * The live feed: an SSE stream with one `streams` event per tick in which
   * something changed, naming the streams that did (their summaries); the
   * page then asks for the new events of the one it shows. Nothing is sent,
   * nor computed, while no page listens.
   */
  private live(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "x-accel-buffering": "no" });
    if (req.method === "HEAD") return void res.end();
    res.write(": agui-state inspector\n\n");
    this.feeds.add(res);
    const dirty = new Set<StreamRecord>();
    let timer: NodeJS.Timeout | undefined;
    const flush = (): void => {
      timer = undefined;
      const streams = [...dirty].map((s) => s.summary());
      dirty.clear();
      res.write(`event: streams\ndata: ${JSON.stringify({ dropped: this.opts.inspector.dropped, streams })}\n\n`);
    };
    const stop = this.opts.inspector.listen((s) => {
      dirty.add(s);
      timer ??= setTimeout(flush, TICK_MS);
    });
    req.on("close", () => {
      stop();
      if (timer) clearTimeout(timer);
      this.feeds.delete(res);
    });
  }
}
