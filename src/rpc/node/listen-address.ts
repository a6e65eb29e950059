/**
 * Where `serve --listen` takes connections (protocol/README.md §2, "One sidecar per host"): a Unix
 * domain socket, created owner-only, or, where there is none (Windows), a loopback TCP port.
 */
export type ListenAddress = { kind: "unix"; path: string } | { kind: "tcp"; host: string; port: number };

/** Whether a host is a loopback address only: 127.0.0.0/8, ::1, or localhost. */
export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^(::ffff:)?127(\.\d{1,3}){3}$/i.test(host);
}

/**
 * The longest socket path every Unix takes: sun_path holds 108 bytes on Linux and 104 on macOS and
 * the BSDs, a terminating NUL included.
 */
export const MAX_SOCKET_PATH_BYTES = 103;

/**
 * Reads `unix:PATH` or `tcp:HOST:PORT` (HOST a loopback address, `[::1]` for IPv6); the problem in
 * words when it is neither. The same text names the address in the clients' `sidecar` option and
 * AGUI_STATE_SIDECAR, so one spelling works everywhere.
 */
export function parseListenAddress(text: string): ListenAddress | { problem: string } {
  if (text.startsWith("unix:")) {
    const path = text.slice("unix:".length);
    if (path === "") return { problem: "unix: needs a path, such as unix:/run/agui-state/sidecar.sock" };
    if (path.includes("\0")) return { problem: "a socket path cannot hold a NUL character" };
    const bytes = Buffer.byteLength(path);
    if (bytes > MAX_SOCKET_PATH_BYTES) return { problem: `the socket path is ${bytes} bytes, over the ${MAX_SOCKET_PATH_BYTES} a Unix socket's name can hold; pick a shorter one` };
    return { kind: "unix", path };
  }
  if (text.startsWith("tcp:")) {
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.slice("tcp:".length));
    const port = m ? Number(m[3]) : NaN;
    if (!m || port > 65535) return { problem: `expected tcp:HOST:PORT with a port from 0 to 65535, got ${JSON.stringify(text)}` };
    const host = (m[1] ?? m[2]) as string;
    // Anyone on the host may open a loopback port; anyone on the network, any other. The sidecar
    // holds every thread's state and serves every run's events: it is never offered beyond the host.
    if (!isLoopback(host)) return { problem: `${host} is not a loopback address; the sidecar serves every thread's state and every run's events, so it listens on this host only (use unix:PATH, or 127.0.0.1)` };
    return { kind: "tcp", host, port };
  }
  return { problem: `expected unix:PATH or tcp:HOST:PORT, got ${JSON.stringify(text)}` };
}

/** The address as the text that names it, as a client's `sidecar` option takes it. */
export function formatListenAddress(a: ListenAddress): string {
  return a.kind === "unix" ? `unix:${a.path}` : `tcp:${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`;
}
