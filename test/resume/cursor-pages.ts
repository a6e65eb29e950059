import type { Cursor, Page, RunEnd } from "../../src/resume/log.js";
import { blocksOf } from "./logged-blocks.js";

/** What a cursor's reads gave: each event's block in order, each page, and the end, if it came. */
export interface Read {
  blocks: string[];
  pages: Page[];
  end: RunEnd | undefined;
}

/**
 * Reads a cursor page by page, `maxBytes()` a page, until it has `count` events and, when `ended`,
 * the run's end (a live run's cursor would wait for more: it stops at the count).
 */
export async function readPages(cursor: Cursor, maxBytes: () => number, count: number, ended: boolean): Promise<Read> {
  const read: Read = { blocks: [], pages: [], end: undefined };
  while (read.blocks.length < count || (ended && read.end === undefined)) {
    const page = await cursor.read(maxBytes());
    read.pages.push(page);
    if (page.end !== undefined) {
      read.end = page.end;
      break;
    }
    read.blocks.push(...blocksOf(page.events));
  }
  return read;
}

/** An event's block, as the recorder stamps it (stamp.ts). */
export const blockOf = (run: string, seq: number, delta: string): string => `id: ${run}.${seq}.n${seq - 1}\ndata: ${JSON.stringify({ type: "TEXT_MESSAGE_CONTENT", delta })}\n\n`;
