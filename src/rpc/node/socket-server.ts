import { chmodSync, lstatSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { connect, createServer, type Server as NetServer, type Socket } from "node:net";
import type { Log } from "../../log.js";
import type { StateService } from "../../service/state-service.js";
import type { StreamService } from "../../service/stream-service.js";
import { formatListenAddress, type ListenAddress } from "./listen-address.js";
import { startServer, type Server } from "./server.js";
import type { Framing } from "./stdio.js";

export interface SocketServerOptions {
  address: ListenAddress;
  framing: Framing;
  service: StateService;
  streams: StreamService;
  log: Log;
  afterChunk?: () => void;
  onMessage?: (chars: number) => void;
  /** --exit-idle: stop once no connection has been open for this many milliseconds (a sidecar a worker started). */
  exitIdleMs?: number;
}

/** Why it does not listen; `served` when a live sidecar already serves the socket (nothing is wrong: connect to it). */
export interface NotListening {
  problem: string;
  served: boolean;
}

export interface SocketServer {
  /** The address it listens on, as a client names it (a TCP port 0 resolved). */
  readonly address: string;
  /** Connections open now. */
  readonly connections: number;
  /** Resolves once stop() was called and every connection has been answered and closed. */
  readonly done: Promise<void>;
  /** Stops taking connections; each open one stops reading, answers what it read, and closes. */
  stop(): void;
}

/**
 * `serve --listen` (protocol/README.md §2, "One sidecar per host"): one StateService and one
 * StreamService shared by every connection, each connection a JSON-RPC session in the framing it
 * has on stdio, so a rejoin a load balancer sends to another worker reaches the run this worker's
 * stream records. A connection that ends releases the streams and reads it opened.
 * Resolves once listening, or with why it cannot.
 */
export async function listenForSessions(opts: SocketServerOptions): Promise<SocketServer | NotListening> {
  const { address } = opts;
  // Held from the check of the path until the socket is bound, so that a start between the two finds
  // the socket, not a free path it would then fail to bind.
  let unlock = (): void => undefined;
  if (address.kind === "unix") {
    const claimed = await claimSocketPath(address.path);
    if ("problem" in claimed) return claimed;
    unlock = claimed.unlock;
  }
  const sessions = new Set<Server>();
  const server = createServer({ noDelay: true }, (socket) => serveConnection(socket));
  // Set while no connection is open, with --exit-idle: the sidecar's last worker has gone.
  let idle: NodeJS.Timeout | undefined;
  const whenIdle = (): void => {
    if (opts.exitIdleMs === undefined || sessions.size > 0) return;
    idle = setTimeout(() => {
      opts.log.info({ exitIdleMs: opts.exitIdleMs }, "no connection for --exit-idle: stopping");
      stop();
    }, opts.exitIdleMs);
  };
  const serveConnection = (socket: Socket): void => {
    clearTimeout(idle);
    const owner = {};
    const session = startServer({ input: socket, output: socket, framing: opts.framing, service: opts.service, streams: opts.streams, log: opts.log, owner, ...(opts.afterChunk ? { afterChunk: opts.afterChunk } : {}), ...(opts.onMessage ? { onMessage: opts.onMessage } : {}) });
    sessions.add(session);
    opts.log.debug({ connections: sessions.size }, "connection opened");
    void session.done.then((why) => {
      sessions.delete(session);
      opts.streams.release(owner);
      socket.end();
      opts.log.debug({ why, connections: sessions.size, requests: session.requests }, "connection closed");
      whenIdle();
    });
  };
  const bound = await listen(server, address);
  unlock();
  if ("problem" in bound) return { problem: bound.problem, served: false };
  // After listening, an error of the listener itself (out of file descriptors on accept) is logged, never thrown:
  // the connections already open go on.
  server.on("error", (e) => opts.log.error({ err: e }, "the listener failed to take a connection"));
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    clearTimeout(idle);
    server.close();
    const open = [...sessions];
    for (const s of open) s.stop();
    void Promise.all(open.map((s) => s.done)).then(() => {
      if (address.kind === "unix") unlinkQuietly(address.path);
      finish();
    });
  };
  whenIdle();
  return {
    address: bound.address,
    get connections() {
      return sessions.size;
    },
    done,
    stop,
  };
}

/**
 * Listens; for a Unix socket, with the file created owner-only (0600 under a umask of 0177, so no
 * moment exists when another user could connect), since whoever connects may read and write every
 * thread's state. Loopback TCP has no owner: any user of the host may connect (docs say so).
 */
function listen(server: NetServer, address: ListenAddress): Promise<{ address: string } | { problem: string }> {
  return new Promise((resolve) => {
    const failed = (e: NodeJS.ErrnoException): void => resolve({ problem: `cannot listen on ${formatListenAddress(address)}: ${e.code === "EADDRINUSE" ? "the address is in use" : e.message}` });
    server.once("error", failed);
    if (address.kind === "unix") {
      const before = process.umask(0o177);
      try {
        server.listen(address.path, () => {
          server.off("error", failed);
          chmodSync(address.path, 0o600);
          resolve({ address: formatListenAddress(address) });
        });
      } finally {
        process.umask(before);
      }
    } else {
      server.listen(address.port, address.host, () => {
        server.off("error", failed);
        const at = server.address();
        resolve({ address: formatListenAddress({ ...address, port: typeof at === "object" && at !== null ? at.port : address.port }) });
      });
    }
  });
}

/**
 * Makes the path free to listen on, or says why not. A socket a live sidecar answers on is refused
 * (the first worker on a host starts the sidecar, and a second start must not take the path from it);
 * one nobody answers on is a dead sidecar's and is removed; anything else at the path is left alone.
 * Two sidecars starting at once take turns through `PATH.lock`, created exclusively; the caller
 * unlocks once it has bound the socket (or failed to).
 */
async function claimSocketPath(path: string): Promise<NotListening | { unlock: () => void }> {
  const lock = `${path}.lock`;
  for (let tries = 0; ; tries++) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx", mode: 0o600 });
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") return { problem: `cannot listen on unix:${path}: ${(e as Error).message}`, served: false };
      if (!alive(Number(readQuietly(lock)))) unlinkQuietly(lock);
      else if (tries > 250) return { problem: `cannot listen on unix:${path}: ${lock} is held by process ${readQuietly(lock)}`, served: false };
      else await new Promise((r) => setTimeout(r, 20));
    }
  }
  const unlock = (): void => unlinkQuietly(lock);
  let kind: "socket" | "other" | "none";
  try {
    kind = lstatSync(path).isSocket() ? "socket" : "other";
  } catch {
    kind = "none";
  }
  let problem: NotListening | undefined;
  if (kind === "other") problem = { problem: `cannot listen on unix:${path}: something other than a socket is there; it is left alone`, served: false };
  else if (kind === "socket") {
    if (await answers(path)) problem = { problem: `cannot listen on unix:${path}: a sidecar is serving there already`, served: true };
    else unlinkQuietly(path);
  }
  if (problem === undefined) return { unlock };
  unlock();
  return problem;
}

/**
 * Whether a sidecar answers on the socket: a `stats` on a new connection, its reply awaited (at most
 * PROBE_MS). Accepting is not enough: a sidecar being killed still accepts until its socket closes,
 * and a start that took that for a live one would leave nobody serving (the clients count a
 * connection the same way, protocol/README.md §2).
 */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(path);
    let heard = "";
    const done = (yes: boolean): void => {
      clearTimeout(timer);
      probe.destroy();
      resolve(yes);
    };
    const timer = setTimeout(() => done(false), PROBE_MS);
    probe.setEncoding("utf8");
    probe.once("connect", () => probe.write('{"jsonrpc":"2.0","id":0,"method":"stats"}\n'));
    probe.on("data", (chunk: string) => {
      heard += chunk;
      if (heard.includes("\n")) done(true);
    });
    probe.once("end", () => done(false));
    probe.once("error", () => done(false));
  });
}

/** How long a sidecar already at the socket has to answer before it counts as gone: the clients' bound for a hung sidecar (§2). */
const PROBE_MS = 5000;

function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

function readQuietly(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone.
  }
}
