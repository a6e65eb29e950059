import type { LoggedEvents } from "../../src/resume/logged.js";

/** The tests' way between a run log's LoggedEvents (src/resume/logged.ts) and one block per event. */

/** Blocks, each a whole event with its id line first, as LoggedEvents. */
export function loggedBlocks(blocks: readonly string[]): LoggedEvents {
  const ends: number[] = [];
  let at = 0;
  for (const b of blocks) ends.push((at += b.length));
  return { text: blocks.join(""), ends };
}

/** Each event's block. */
export function blocksOf(e: LoggedEvents): string[] {
  const out: string[] = [];
  let from = 0;
  for (const end of e.ends) {
    out.push(e.text.slice(from, end));
    from = end;
  }
  return out;
}
