import type { LoggedEvents } from "./logged.js";
import type { Page, RunEnd } from "./log.js";

/**
 * The Redis store's keys and stream entries (redis-log.ts, protocol/README.md §16), and how a
 * cursor's page is cut from entries (redis-cursor.ts).
 */
const P = "agui-state:";
export const runKey = (run: string, part: "events" | "meta" | "owner" | "readers"): string => `${P}run:${run}:${part}`;
export const threadKey = (threadId: string, path: string): string => `${P}thread:${path}\0${threadId}`;

/** A stream entry as ioredis returns it: its id and its flat [name, value, ...] fields. */
export type Entry = [id: string, fields: string[]];

/** A field's value in a stream entry's flat [name, value, ...] list. */
export function field(fields: string[] | undefined, name: string): string | undefined {
  if (!fields) return undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

/** The number of the first event of the part an entry id `0-<n>` holds (or, for the end entry, one past the last event). */
export const firstOf = (id: string): number => Number(id.slice(2));

/** A part's entry as LoggedEvents; an entry with no `e` field (the end, or one not ours) holds no events. */
export function partOf(fields: string[]): LoggedEvents {
  const e = field(fields, "e");
  return { text: field(fields, "b") ?? "", ends: e === undefined || e === "" ? [] : e.split(",").map(Number) };
}

/**
 * Whether entries go on right after event `seq` (their first event past it is `seq + 1`, or the end
 * follows it): entries a blocking read brought from further on are no page for a cursor behind them.
 */
export function follows(entries: readonly Entry[], seq: number): boolean {
  for (const [id, fields] of entries) {
    const first = firstOf(id);
    const last = field(fields, "end") !== undefined ? first : first + partOf(fields).ends.length - 1;
    if (last > seq) return first <= seq + 1;
  }
  return false;
}

/** Where a cursor is: after the `seq`-th event; `partial` is the first event of the entry its last page stopped inside. */
export interface Position {
  seq: number;
  partial: number | undefined;
}

/**
 * One page cut from entries in their order, moving the position as it takes events: whole events,
 * about `maxBytes` of UTF-8 and at least one (log.ts, Cursor.read). Entries, or parts of them, at or
 * before the position are skipped, so the entries may start anywhere before it; a gap in the
 * numbers (an `events` key removed and written again) is passed over as the entries come.
 */
export class PageCut {
  private readonly texts: string[] = [];
  private readonly ends: number[] = [];
  private length = 0;
  private bytes = 0;
  private end: RunEnd | undefined;
  private done = false;

  constructor(
    private readonly at: Position,
    private readonly maxBytes: number,
  ) {}

  /** Takes what it can of the entries; true while the page wants more. */
  add(entries: readonly Entry[]): boolean {
    for (const [id, fields] of entries) {
      if (this.done) break;
      const end = field(fields, "end");
      if (end !== undefined) {
        // The run's end is a page of its own, once every event before it was handed out.
        if (this.ends.length === 0) this.end = end as RunEnd;
        this.done = true;
        break;
      }
      this.take(firstOf(id), partOf(fields));
    }
    return !this.done;
  }

  page(): Page | undefined {
    if (this.ends.length > 0) return { events: { text: this.texts.length === 1 ? (this.texts[0] as string) : this.texts.join(""), ends: this.ends } };
    return this.end === undefined ? undefined : { end: this.end };
  }

  private take(first: number, part: LoggedEvents): void {
    const n = part.ends.length;
    const skip = Math.max(0, this.at.seq + 1 - first);
    if (skip >= n) return;
    const from = skip === 0 ? 0 : (part.ends[skip - 1] as number);
    const rest = from === 0 ? part.text : part.text.slice(from);
    const restBytes = Buffer.byteLength(rest, "utf8");
    if (this.bytes + restBytes <= this.maxBytes) {
      this.push(rest, part.ends, skip, n, from);
      this.bytes += restBytes;
      this.at.seq = first + n - 1;
      this.at.partial = undefined;
      if (this.bytes >= this.maxBytes) this.done = true;
      return;
    }
    // The rest of the part does not fit: event by event, as many as fit (at least one a page).
    let k = skip;
    let taken = 0;
    for (; k < n; k++) {
      const eventBytes = Buffer.byteLength(part.text.slice(k === 0 ? 0 : part.ends[k - 1], part.ends[k]), "utf8");
      if (this.ends.length + taken > 0 && this.bytes + eventBytes > this.maxBytes) break;
      this.bytes += eventBytes;
      taken++;
    }
    this.done = true;
    // None fit after the events already on the page: the part waits, whole, for the next page.
    if (taken === 0) return;
    this.push(part.text.slice(from, part.ends[k - 1]), part.ends, skip, k, from);
    this.at.seq = first + k - 1;
    this.at.partial = k < n ? first : undefined;
  }

  /** Adds events `from`..`to - 1` of a part, whose text (starting at `offset` in the part) is `text`. */
  private push(text: string, ends: readonly number[], from: number, to: number, offset: number): void {
    this.texts.push(text);
    for (let k = from; k < to; k++) this.ends.push(this.length + (ends[k] as number) - offset);
    this.length += text.length;
  }
}
