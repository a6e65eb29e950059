import { CLIENT_SSE_LIMIT } from "../stream/events.js";
import type { IdLines } from "./ids.js";

/** What one part of the fixer's output becomes: the text for the client, and the events in it to log. */
export interface StampedPart {
  /** Every block of the part, each event's with our `id:` line first. */
  text: string;
  /**
   * The part's events, one block after another, each starting with its `id:` line: `text` itself when
   * every block of the part is an event (the usual case: no second string is made).
   */
  events: string;
  /** Where each event's block ends in `events`, in UTF-16 code units. */
  ends: number[];
}

/**
 * Gives every event of a repaired SSE stream its id (protocol/README.md §16). The fixer writes SSE
 * with LF line ends (§13), so its events end at "\n\n" and nowhere else. A block with a `data` field
 * dispatches an event (HTML Standard, "Interpreting an event stream") and gets `id: <id>` as its first
 * line; any `id` line the upstream wrote in a block is taken out (counted in `upstreamIds`), since only
 * our ids can be resumed from: left in a block without data, it would still set the client's last
 * event id. A block without data (a comment, a keep-alive) goes on without being logged: it dispatches
 * nothing. Past CLIENT_SSE_LIMIT of one unfinished block, the client's run fails whatever is sent (§13,
 * SSE_BUFFER_LIMIT): the stamper then passes everything on as it comes, and the run is no longer
 * resumable (`passing`).
 *
 * This runs once per event of every resumable stream, so the usual part (the fixer's blocks, each
 * starting `data:`, no `id` line anywhere) takes a path that makes one string for the client, joined
 * once from the blocks and their id lines: the stamping is most of what resume adds to each event
 * (docs/benchmarks.md, "Figures behind choices in the source").
 */
export class Stamper {
  private pending = "";
  passing = false;
  upstreamIds = 0;

  constructor(private readonly ids: IdLines) {}

  /** Any text of the stream, cut anywhere. */
  push(chunk: string): StampedPart {
    if (this.passing) return { text: chunk, events: "", ends: [] };
    const part = new Part();
    this.scan(this.pending === "" ? chunk : this.pending + chunk, part);
    return part.done();
  }

  /**
   * The stream as the fixer's items (StreamFixer#pushEach): an item that is one whole block starting
   * `data:`, with no `id` line, and nothing held before it (the usual one) gets its id line without
   * being searched again; any other goes through `push`'s reading.
   */
  pushEach(texts: readonly string[]): StampedPart {
    const part = new Part();
    for (const t of texts) {
      if (this.passing) part.other(t);
      else if (this.pending === "" && t.startsWith("data:") && t.indexOf("\n\n") === t.length - 2 && !t.includes("\nid")) part.event(this.ids.next(), t);
      else this.scan(this.pending === "" ? t : this.pending + t, part);
    }
    return part.done();
  }

  /** The end of the stream: a block it cut off goes on as it is, unlogged (the client reads it only if it ends). */
  end(): StampedPart {
    const text = this.pending;
    this.pending = "";
    return { text, events: "", ends: [] };
  }

  /** Reads `all`'s whole blocks into `part`; the rest is held, or, past the client's limit, passed on. */
  private scan(all: string, part: Part): void {
    // No line of the text starts with "id": no block has an id field to take out.
    const noIds = !all.startsWith("id") && !all.includes("\nid");
    let from = 0;
    for (let end = all.indexOf("\n\n"); end !== -1; end = all.indexOf("\n\n", from)) {
      const stop = end + 2;
      let block = all.slice(from, stop);
      let event = true;
      if (!noIds || !all.startsWith("data:", from)) ({ event, block } = this.stamp(block));
      from = stop;
      if (event) part.event(this.ids.next(), block);
      else part.other(block);
    }
    const rest = all.slice(from);
    if (rest.length > CLIENT_SSE_LIMIT) {
      this.passing = true;
      this.pending = "";
      part.other(rest);
    } else this.pending = rest;
  }

  /** Any block: its id lines taken out, and whether it is an event (it has data), to get our id line first. */
  private stamp(block: string): { event: boolean; block: string } {
    if (!hasField(block, "id")) return { event: hasField(block, "data"), block };
    // Fields are "name" or "name:value" at a line's start (HTML Standard §9.2.6).
    const kept: string[] = [];
    let data = false;
    for (const line of block.slice(0, -2).split("\n")) {
      if (line === "id" || line.startsWith("id:")) {
        this.upstreamIds++;
        continue;
      }
      if (line === "data" || line.startsWith("data:")) data = true;
      kept.push(line);
    }
    // A block that was only id lines goes, whole: nothing of it would reach the page.
    return { event: data, block: kept.length === 0 ? "" : `${kept.join("\n")}\n\n` };
  }
}

/**
 * One part's text as it is stamped: in pieces, joined once (a += per event would build a rope of
 * ropes), and its events apart from the other blocks once there is one of those.
 */
class Part {
  private readonly pieces: string[] = [];
  private length = 0;
  private apart: string[] | undefined;
  private apartLength = 0;
  private readonly ends: number[] = [];

  event(line: string, block: string): void {
    const n = line.length + block.length;
    this.pieces.push(line, block);
    this.length += n;
    if (this.apart === undefined) this.ends.push(this.length);
    else {
      this.apart.push(line, block);
      this.ends.push((this.apartLength += n));
    }
  }

  other(text: string): void {
    if (text === "") return;
    if (this.apart === undefined) {
      this.apart = this.pieces.slice();
      this.apartLength = this.length;
    }
    this.pieces.push(text);
    this.length += text.length;
  }

  done(): StampedPart {
    const text = this.pieces.join("");
    return { text, events: this.apart === undefined ? text : this.apart.join(""), ends: this.ends };
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
