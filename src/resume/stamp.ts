import { CLIENT_SSE_LIMIT } from "../stream/events.js";

/** One event as the client gets it: its SSE block with our `id:` line first, and that id. */
export interface Stamped {
  id: string;
  block: string;
}

/** What one part of the fixer's output becomes: the text for the client, and the events in it to log. */
export interface StampedPart {
  text: string;
  events: Stamped[];
}

/**
 * Gives every event of a repaired SSE stream its id (protocol/README.md §16). The fixer writes SSE
 * with LF line ends (§13), so its events end at "\n\n" and nowhere else. A block with a `data` field
 * dispatches an event (HTML Standard, "Interpreting an event stream") and gets `id: <id>` as its first
 * line; any `id` line the upstream wrote in it is taken out (counted in `upstreamIds`), since only our
 * ids can be resumed from. A block without data (a comment, a keep-alive) goes on as it is and is not
 * logged: it dispatches nothing. Past CLIENT_SSE_LIMIT of one unfinished block, the client's run fails
 * whatever is sent (§13, SSE_BUFFER_LIMIT): the stamper then passes everything on as it comes, and the
 * run is no longer resumable (`passing`).
 */
export class Stamper {
  private pending = "";
  passing = false;
  upstreamIds = 0;

  constructor(private readonly mint: () => string) {}

  push(text: string): StampedPart {
    if (this.passing) return { text, events: [] };
    let rest = this.pending === "" ? text : this.pending + text;
    let out = "";
    const events: Stamped[] = [];
    for (let end = rest.indexOf("\n\n"); end !== -1; end = rest.indexOf("\n\n")) {
      const block = rest.slice(0, end + 2);
      rest = rest.slice(end + 2);
      const stamped = this.stamp(block);
      if (stamped) {
        events.push(stamped);
        out += stamped.block;
      } else out += block;
    }
    if (rest.length > CLIENT_SSE_LIMIT) {
      this.passing = true;
      this.pending = "";
      return { text: out + rest, events };
    }
    this.pending = rest;
    return { text: out, events };
  }

  /** The end of the stream: a block it cut off goes on as it is, unlogged (the client reads it only if it ends). */
  end(): StampedPart {
    const text = this.pending;
    this.pending = "";
    return { text, events: [] };
  }

  private stamp(block: string): Stamped | undefined {
    // Fields are "name" or "name:value" at a line's start (HTML Standard §9.2.6).
    const lines = block.slice(0, -2).split("\n");
    let data = false;
    let kept: string[] | undefined;
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] as string;
      if (line === "id" || line.startsWith("id:")) {
        this.upstreamIds++;
        kept ??= lines.slice(0, i);
        continue;
      }
      if (line === "data" || line.startsWith("data:")) data = true;
      kept?.push(line);
    }
    if (!data) return undefined;
    const id = this.mint();
    return { id, block: `id: ${id}\n${kept ? kept.join("\n") : block.slice(0, -2)}\n\n` };
  }
}
