import { write } from "node:fs";

/**
 * Where pino writes its lines: fd 2, asynchronously, in order, best effort.
 * - A parent that reads stderr slowly or never must not stall the sidecar:
 *   lines queue in memory up to `maxBytes`; past that, new lines are dropped
 *   and counted, and a note says how many once there is room again.
 * - A full non-blocking pipe (EAGAIN) is retried after 1 ms, backing off to
 *   50 ms, not after a fixed 100 ms, so a parent that does read gets the log
 *   at pipe speed.
 * - Nothing here ever writes synchronously, at exit either: when the process
 *   ends with lines still queued (the parent stopped reading), those lines are
 *   lost, and what reached the parent is a prefix of what was logged, without
 *   holes. (pino.destination's exit hook writes the backlog synchronously and
 *   could block the exit for as long as the parent does not read.)
 * - If the parent closes stderr (EPIPE), logging stops; serving goes on.
 */
export class StderrSink {
  private queue: string[] = [];
  private queued = 0;
  private writing = false;
  private closed = false;
  private dropped = 0;
  private backoff = 1;

  constructor(
    private readonly fd = 2,
    private readonly maxBytes = 16 * 1024 * 1024,
  ) {}

  write(line: string): boolean {
    if (this.closed) return true;
    if (this.queued + line.length > this.maxBytes) {
      this.dropped++;
      return true;
    }
    if (this.dropped) {
      const note = JSON.stringify({ level: 40, time: new Date().toISOString(), pid: process.pid, msg: `dropped ${this.dropped} log records: stderr was not being read` });
      this.dropped = 0;
      this.enqueue(note + "\n");
    }
    this.enqueue(line);
    return true;
  }

  private enqueue(line: string): void {
    this.queue.push(line);
    this.queued += line.length;
    if (!this.writing) this.flush();
  }

  private flush(): void {
    const data = Buffer.from(this.queue.join(""), "utf8");
    this.queue = [];
    this.queued = 0;
    this.writing = true;
    this.attempt(data);
  }

  private attempt(data: Buffer): void {
    write(this.fd, data, 0, data.length, null, (err, n) => {
      if (err) {
        if (err.code === "EAGAIN") {
          setTimeout(() => this.attempt(data), this.backoff);
          this.backoff = Math.min(this.backoff * 2, 50);
          return;
        }
        // EPIPE, EBADF: nobody will read the log any more.
        this.closed = true;
        this.writing = false;
        this.queue = [];
        this.queued = 0;
        return;
      }
      this.backoff = 1;
      if (n < data.length) return this.attempt(data.subarray(n));
      this.writing = false;
      if (this.queue.length) this.flush();
    });
  }
}
