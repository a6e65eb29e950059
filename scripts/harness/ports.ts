import net from "node:net";

/**
 * A TCP port on 127.0.0.1 that nothing listens on now: the kernel's pick, bound and released at once.
 * It is free only until someone else binds it (a test file running in parallel may), so whoever
 * starts a server on it and can pick again should do so when the bind fails (startRedis does).
 */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
