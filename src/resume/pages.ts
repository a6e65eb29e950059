import type { Writable } from "node:stream";
import type { RunEnd, RunLog } from "./log.js";
import { Replay } from "./rejoin.js";

/**
 * How much of a run one read hands over at a time (protocol/README.md §16, back-pressure): a rejoin's
 * reader holds at most about this much of the run outside the log, whatever the run's length and
 * however slowly its client reads. 256 KiB is the run log's own seal size (memory-log.ts), and many
 * times a socket's buffer, so a fast client is not slowed by the paging.
 */
export const PAGE_BYTES = 256 * 1024;

/** Resolves once `out` can take more, or is gone. */
const drained = (out: Writable): Promise<void> =>
  new Promise((done) => {
    const go = () => {
      out.off("drain", go);
      out.off("close", go);
      done();
    };
    out.on("drain", go);
    out.on("close", go);
  });

/**
 * Writes a run's events after its `after`-th to `out`, page by page, each once `out` took the last
 * (a reload's prelude right after the first event), then resolves with how the run ended, or
 * "left" when `out` closed first. The page on its way counts against the log's cap (RunLog.hold).
 */
export async function readPages(log: RunLog, run: string, after: number, prelude: readonly string[], pageBytes: number, out: Writable): Promise<RunEnd | "left"> {
  const cursor = await log.open(run, after);
  const replay = new Replay(prelude);
  let left = out.destroyed;
  const leave = () => {
    left = true;
    cursor.close();
  };
  out.once("close", leave);
  try {
    while (!left) {
      const page = await cursor.read(pageBytes);
      if (left) break;
      if (page.end !== undefined) return page.end;
      const text = replay.text(page.events);
      const bytes = Buffer.byteLength(text, "utf8");
      log.hold(bytes);
      try {
        if (!out.write(text)) await drained(out);
      } finally {
        log.hold(-bytes);
      }
    }
    return "left";
  } finally {
    out.off("close", leave);
    cursor.close();
  }
}
