import { execFileSync } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

/**
 * What the operating system can tell about a child, and real OS pipes. The
 * memory figures here are for `npm run bench` and the soak's curve; a
 * pass/fail test asserts on what the process did, never on its RSS.
 */

export const MB = 1024 * 1024;
export const mb = (bytes: number): string => (bytes / MB).toFixed(1);

/** A field of /proc/<pid>/status in KiB (VmRSS, VmHWM); NaN when it cannot be read, as once the process is gone. */
export function statusKiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/**
 * CPU time a process has used so far (user + system), in µs, from
 * /proc/<pid>/stat; NaN when it cannot be read. The kernel counts in clock
 * ticks (USER_HZ, 100 a second on Linux), so a figure per request needs
 * thousands of requests to mean anything.
 */
export function cpuMicros(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name, which is in parentheses and may hold spaces: utime and stime are the 12th and 13th.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(f[11]) + Number(f[12])) * 1e6) / USER_HZ;
  } catch {
    return NaN;
  }
}
const USER_HZ = 100;

/** Resident set size of a process in bytes; 0 when it cannot be read. */
export function rssOf(pid: number): number {
  const kib = statusKiB(pid, "VmRSS");
  return Number.isNaN(kib) ? 0 : kib * 1024;
}

/** Samples a process's RSS every `everyMs` until stopped; reports the peak, in bytes. */
export function sampleRss(pid: number, everyMs = 5): { stop(): { peak: number; samples: number } } {
  let peak = rssOf(pid);
  let samples = 1;
  const timer = setInterval(() => {
    peak = Math.max(peak, rssOf(pid));
    samples++;
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      peak = Math.max(peak, rssOf(pid));
      return { peak, samples: samples + 1 };
    },
  };
}

/**
 * A real OS pipe for a child's stderr, as Python's and Go's subprocess pipes
 * are (Node's stdio "pipe" is a socketpair): a FIFO in a temporary
 * directory. `writeFd` is for the child (close it once spawned); `readFd` is
 * non-blocking: readSync throws EAGAIN when it is empty and returns 0 at the end.
 */
export function osPipe(): { readFd: number; writeFd: number; close(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), "agui-state-pipe-"));
  const fifo = path.join(dir, "fifo");
  execFileSync("mkfifo", [fifo]);
  const readFd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeFd = openSync(fifo, constants.O_WRONLY);
  let closed = false;
  return {
    readFd,
    writeFd,
    close: () => {
      if (closed) return;
      closed = true;
      for (const fd of [readFd, writeFd]) {
        try {
          closeSync(fd);
        } catch {
          // already closed by the caller
        }
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Reads what is in a non-blocking fd right now (one read, up to `max` bytes); empty when nothing is there. */
export function readNow(fd: number, max = 1 << 20): Buffer {
  const buf = Buffer.alloc(max);
  try {
    return buf.subarray(0, readSync(fd, buf, 0, max, null));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EAGAIN") return Buffer.alloc(0);
    throw e;
  }
}

/** Everything a non-blocking fd holds right now, read until it is empty. */
export function readAllNow(fd: number): Buffer {
  const chunks: Buffer[] = [];
  for (let chunk = readNow(fd); chunk.length; chunk = readNow(fd)) chunks.push(chunk);
  return Buffer.concat(chunks);
}
