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
    const all = this.pending === "" ? text : this.pending + text;
    const parts: string[] = [];
    const events: Stamped[] = [];
    let from = 0;
    for (let end = all.indexOf("\n\n"); end !== -1; end = all.indexOf("\n\n", from)) {
      const block = all.slice(from, end + 2);
      from = end + 2;
      const stamped = this.stamp(block);
      if (stamped) {
        events.push(stamped);
        parts.push(stamped.block);
      } else parts.push(block);
    }
    // One join, not a += per event: the client's text is one flat string, written once.
    const out = parts.join("");
    const rest = all.slice(from);
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
    // The usual block: a data field and no id of the upstream's. Found with indexOf, not a split per event.
    if (!hasField(block, "id")) {
      if (!hasField(block, "data")) return undefined;
      const id = this.mint();
      return { id, block: `id: ${id}\n${block}` };
    }
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

/** Whether an LF-ended block has a line that is the field `name` ("name" alone or "name:…"). */
function hasField(block: string, name: string): boolean {
  for (let at = block.startsWith(name) ? 0 : block.indexOf(`\n${name}`); at !== -1; at = block.indexOf(`\n${name}`, at + 1)) {
    const after = at === 0 && block.startsWith(name) ? name.length : at + 1 + name.length;
    const c = block.charCodeAt(after);
    if (c === 58 /* : */ || c === 10 /* LF */) return true;
  }
  return false;
}
