import net from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A TCP relay between a client and a server, as a flaky network is: each connection is passed
 * through until the bytes from the server reach the cut the test chose for that connection, then
 * both sides are destroyed, so the client sees its response break off. A cut is counted in the
 * response's bytes: after the `boundary`-th blank line ("\n\n", the end of an SSE event) plus
 * `extra` more bytes (0: exactly at an event boundary; more: inside the next event).
 * `target()` names where each new connection goes, so a rejoin can reach another replica.
 */
export interface Cut {
  boundary: number;
  extra: number;
}

export class Relay {
  private readonly server: net.Server;
  /** Connections made so far; each takes the next cut, and none is cut once the list is used up. */
  connections = 0;
  cutsMade = 0;
  private cutWaiters: (() => void)[] = [];

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
    const cut = this.cuts[this.connections++];
    const server = net.connect(this.target(), "127.0.0.1");
    client.pipe(server);
    let seen = 0;
    let previous = 0;
    let cutAt = -1;
    server.on("data", (chunk: Buffer) => {
      if (!cut) return void client.write(chunk);
      if (cutAt < 0) {
        // Find the cut in this chunk, if it falls here: count blank lines across chunk edges.
        for (let i = 0; i < chunk.length; i++) {
          const b = chunk[i];
          if (b === 10 && previous === 10 && ++seen === cut.boundary) {
            cutAt = i + 1 + cut.extra;
            break;
          }
          previous = b ?? 0;
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

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
