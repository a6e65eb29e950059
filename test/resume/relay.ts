import net from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A TCP relay between a client and a server, as a flaky network is: each connection is passed
 * through until the bytes from the server reach the cut the test chose for that connection, then
 * both sides are destroyed, so the client sees its response break off. A cut is counted in the
 * response's bytes: after the `boundary`-th blank line ("\n\n", the end of an SSE event) plus
 * `extra` more bytes (0: exactly at an event boundary; more: inside the next event). A resumable
 * answer's opening block (the id `<run>.0.<nonce>` alone, protocol/README.md §16) is no event and is
 * not counted: `boundary` 0 cuts right after it, before the first event.
 * `target()` names where each new connection goes, so a rejoin can reach another replica.
 * A connection takes its cut when its first request bytes arrive, so one a browser opens ahead of
 * need (a preconnect) and never uses takes none.
 */
export interface Cut {
  boundary: number;
  extra: number;
}

/** A cut's place, in words, for a test's title: boundary 0 is the end of the answer's opening block, before any event. */
export const cutName = (cut: Cut): string => `${cut.boundary === 0 ? "after the opening id block" : `after event ${cut.boundary}`}${cut.extra ? ` and ${cut.extra} bytes into the next` : ""}`;

/** The end of an opening block: `id: <run>.0.<nonce>` and a blank line, as the last bytes seen. */
const OPENING_END = /(^|\n)id: [A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+\n\n$/;
const OPENING_BYTES = 48;

export class Relay {
  private readonly server: net.Server;
  /** Connections that carried a request so far; each takes the next cut, and none is cut once the list is used up. */
  connections = 0;
  cutsMade = 0;
  private cutWaiters: (() => void)[] = [];
  /** Every socket either side holds, destroyed at close(), so a kept-alive connection does not hold it open. */
  private readonly sockets = new Set<net.Socket>();

  /** Resolves once `n` cuts have been made. */
  cut(n = 1): Promise<void> {
    return new Promise((resolve) => {
      const check = () => (this.cutsMade >= n ? resolve() : this.cutWaiters.push(check));
      check();
    });
  }

  private constructor(
    private readonly cuts: Cut[],
    private readonly target: () => number,
  ) {
    this.server = net.createServer((client) => this.relay(client));
  }

  static async start(cuts: Cut[], target: () => number): Promise<Relay> {
    const r = new Relay(cuts, target);
    await new Promise<void>((resolve) => r.server.listen(0, "127.0.0.1", resolve));
    return r;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private relay(client: net.Socket): void {
    let cut: Cut | undefined;
    client.once("data", () => (cut = this.cuts[this.connections++]));
    const server = net.connect(this.target(), "127.0.0.1");
    for (const s of [client, server]) {
      this.sockets.add(s);
      s.on("close", () => this.sockets.delete(s));
    }
    client.pipe(server);
    let seen = 0;
    let previous = 0;
    let cutAt = -1;
    // The last bytes seen, to tell the opening block's end from an event's.
    let tail = "";
    server.on("data", (chunk: Buffer) => {
      if (!cut) return void client.write(chunk);
      if (cutAt < 0) {
        // Find the cut in this chunk, if it falls here: count blank lines across chunk edges.
        for (let i = 0; i < chunk.length; i++) {
          const b = chunk[i] ?? 0;
          tail = (tail + String.fromCharCode(b)).slice(-OPENING_BYTES);
          if (b === 10 && previous === 10 && (OPENING_END.test(tail) ? cut.boundary === 0 : ++seen === cut.boundary)) {
            cutAt = i + 1 + cut.extra;
            break;
          }
          previous = b;
        }
        if (cutAt < 0) return void client.write(chunk);
      }
      if (cutAt > chunk.length) {
        cutAt -= chunk.length;
        return void client.write(chunk);
      }
      client.write(chunk.subarray(0, cutAt), () => {
        this.cutsMade++;
        client.destroy();
        server.destroy();
        for (const w of this.cutWaiters.splice(0)) w();
      });
      server.removeAllListeners("data");
    });
    const end = () => {
      client.destroy();
      server.destroy();
    };
    server.on("error", end);
    client.on("error", end);
    server.on("end", () => client.end());
  }

  /** Stops listening and cuts every connection still open (a browser keeps idle ones for reuse). */
  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
