import type { ChildProcessWithoutNullStreams } from "node:child_process";

/**
 * What `parse` finds in a child's stdout so far, once it finds something (a server's `listening URL`
 * line). Rejects when the child cannot be started or exits first, or after `ms`: a hang guard, never an
 * assertion. `stderr` is what the child has said so far, for the message.
 */
export function untilPrinted<T>(child: ChildProcessWithoutNullStreams, parse: (out: string) => T | undefined, opts: { what: string; ms: number; stderr: () => string }): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let out = "";
    const guard = setTimeout(() => reject(new Error(`${opts.what} did not listen within ${opts.ms} ms; stderr:\n${opts.stderr()}`)), opts.ms);
    child.on("error", (e) => {
      clearTimeout(guard);
      reject(e);
    });
    child.on("exit", (code) => {
      clearTimeout(guard);
      reject(new Error(`${opts.what} exited (${String(code)}) before listening; stderr:\n${opts.stderr()}`));
    });
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d: string) => {
      out += d;
      const found = parse(out);
      if (found !== undefined) {
        clearTimeout(guard);
        resolve(found);
      }
    });
  });
}
