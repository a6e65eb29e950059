/**
 * Events as the run log takes and hands them (log.ts): their SSE blocks one after another, each
 * starting with its `id:` line and ending at its one blank line (stamp.ts), and where each ends. One
 * string per part, not a string per event: the memory store keeps the very string the client was
 * sent, with nothing encoded or copied on the stream's path (docs/benchmarks.md, "Figures behind
 * choices in the source").
 */
export interface LoggedEvents {
  text: string;
  /** Where each event's block ends in `text`, in UTF-16 code units. */
  ends: readonly number[];
}

/** The id of a logged block: its first line is `id: <id>` (stamp.ts). */
export const idOfBlock = (block: string): string => block.slice(4, block.indexOf("\n"));
