import type { LoggedEvents } from "./logged.js";

/**
 * Numbers kept in a typed array, grown by doubling: off the heap, so the garbage collector never
 * walks them (a run of 100,000 events has 800 KB of them), and trimmed when the run ends.
 */
class Offsets {
  private a = new Float64Array(16);
  length = 0;

  push(v: number): void {
    if (this.length === this.a.length) {
      const b = new Float64Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.length++] = v;
  }

  at(i: number): number {
    return this.a[i] as number;
  }

  trim(): void {
    if (this.a.length > this.length) this.a = this.a.slice(0, this.length);
  }
}

/**
 * The open parts are sealed into one segment once this many bytes wait, and when the run ends:
 * encoded once, into a buffer of their exact size outside Node's shared pool. A read never seals
 * (it takes the open parts' strings as they are), so a reader that keeps up with a live run, one
 * read per part, does not cut the run into a segment per part.
 */
const SEAL_BYTES = 256 * 1024;

/**
 * A run's events, packed: sealed segments of UTF-8 (the events' bytes as the client got them, one
 * after another) and, after them, the parts logged since the last seal, kept as the very strings the
 * client was sent; and, per event, the byte offset in the run where it ends. So logging a part costs
 * no copy on the stream's path, and a retained event costs its UTF-8 bytes and one number: a string
 * holding one character past Latin-1 (a typographic quote in a model's answer) takes two bytes for
 * every character, which sealing as UTF-8 does not (docs/benchmarks.md, "Figures behind choices in
 * the source").
 *
 * Events are numbered from 1, as their ids are (ids.ts); "after `a`" means from event a + 1.
 */
export class PackedEvents {
  private segments: Buffer[] = [];
  /** The byte offset in the run where each sealed segment starts. */
  private starts: number[] = [];
  /** Events in the sealed segments: the open parts hold the events after them. */
  private sealed = 0;
  /**
   * Parts logged since the last seal: their text as given, the number of the event before their
   * first, the byte offset in the run where they start, and, for a part past ASCII, where each of
   * its events ends in it in characters (a copy: the caller's array is its own). In an ASCII part a
   * character is a byte, and the byte offsets say it.
   */
  private openTexts: string[] = [];
  private openAfter: number[] = [];
  private openStarts: number[] = [];
  private openChars: (readonly number[] | undefined)[] = [];
  private openBytes = 0;
  /** Per event: the byte offset in the run where its block ends. */
  private ends = new Offsets();
  /** UTF-8 bytes of all the events. */
  bytes = 0;

  get count(): number {
    return this.ends.length;
  }

  /**
   * Logs whole events: `text` ends where its last event ends (`ends`, in characters), and holds
   * `bytes` UTF-8 bytes. The string is kept as it is until the next seal.
   */
  add(text: string, ends: readonly number[], bytes: number): void {
    this.openAfter.push(this.ends.length);
    this.openStarts.push(this.bytes);
    this.openChars.push(bytes === text.length ? undefined : ends.slice());
    for (const end of byteEnds(text, ends, bytes)) this.ends.push(this.bytes + end);
    this.openTexts.push(text);
    this.openBytes += bytes;
    this.bytes += bytes;
    if (this.openBytes >= SEAL_BYTES) this.seal();
  }

  /** No more events: everything sealed, and the offsets trimmed to their number. */
  finish(): void {
    this.seal();
    this.ends.trim();
  }

  /**
   * The last event of a page after `after`: as many events as fit in `maxBytes`, and at least one
   * whatever its size. `after` must be below `count`.
   */
  pageEnd(after: number, maxBytes: number): number {
    const limit = this.endOf(after) + maxBytes;
    // The last event ending at or before the limit (binary search: ends only grow).
    let lo = after + 1;
    let hi = this.ends.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.endOf(mid) <= limit) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Events after `after` up to and including event `to`, with where each ends in characters. */
  slice(after: number, to: number): LoggedEvents {
    const sealedTo = Math.min(to, this.sealed);
    const head = after < sealedTo ? this.sealedSlice(after, sealedTo) : undefined;
    const from = Math.max(after, this.sealed);
    const tail = from < to ? this.openSlice(from, to) : undefined;
    if (head === undefined) return tail ?? { text: "", ends: [] };
    if (tail === undefined) return head;
    const shift = head.text.length;
    return { text: head.text + tail.text, ends: [...head.ends, ...tail.ends.map((e) => e + shift)] };
  }

  /** Where event `seq` ends in the run, in bytes (0 for event 0, before the first). */
  private endOf(seq: number): number {
    return seq <= 0 ? 0 : this.ends.at(seq - 1);
  }

  private seal(): void {
    if (this.openTexts.length === 0) return;
    const segment = Buffer.allocUnsafeSlow(this.openBytes);
    let at = 0;
    for (const s of this.openTexts) at += segment.write(s, at, "utf8");
    this.starts.push(this.bytes - this.openBytes);
    this.segments.push(segment);
    this.sealed = this.ends.length;
    this.openTexts = [];
    this.openAfter = [];
    this.openStarts = [];
    this.openChars = [];
    this.openBytes = 0;
  }

  /** Sealed events, decoded: each event's characters counted on its own unless the page is ASCII. */
  private sealedSlice(after: number, to: number): LoggedEvents {
    const from = this.endOf(after);
    const bytes = this.sealedBytes(from, this.endOf(to));
    const text = bytes.toString("utf8");
    const ends: number[] = [];
    if (text.length === bytes.length) {
      for (let seq = after + 1; seq <= to; seq++) ends.push(this.endOf(seq) - from);
      return { text, ends };
    }
    let chars = 0;
    let prev = 0;
    for (let seq = after + 1; seq <= to; seq++) {
      const end = this.endOf(seq) - from;
      chars += bytes.toString("utf8", prev, end).length;
      ends.push(chars);
      prev = end;
    }
    return { text, ends };
  }

  /** The sealed bytes from `from` to `to`: a view of one segment, or a copy of the pieces of several. */
  private sealedBytes(from: number, to: number): Buffer {
    // The segment holding byte `from`: the last that starts at or before it.
    let seg = 0;
    for (let lo = 0, hi = this.starts.length - 1; lo <= hi; ) {
      const mid = (lo + hi) >> 1;
      if ((this.starts[mid] as number) <= from) {
        seg = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const parts: Buffer[] = [];
    for (; seg < this.segments.length && (this.starts[seg] as number) < to; seg++) {
      const s = this.starts[seg] as number;
      const b = this.segments[seg] as Buffer;
      parts.push(b.subarray(Math.max(0, from - s), Math.min(b.length, to - s)));
    }
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts);
  }

  /** Open events: slices of the parts' strings, cut where their ends say (no encoding either way). */
  private openSlice(after: number, to: number): LoggedEvents {
    // The part holding event after + 1: the last whose first event is at or before it.
    let p = 0;
    for (let lo = 0, hi = this.openAfter.length - 1; lo <= hi; ) {
      const mid = (lo + hi) >> 1;
      if ((this.openAfter[mid] as number) <= after) {
        p = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    const texts: string[] = [];
    const ends: number[] = [];
    let chars = 0;
    for (let seq = after; seq < to; p++) {
      const text = this.openTexts[p] as string;
      const first = this.openAfter[p] as number;
      const last = p + 1 < this.openAfter.length ? (this.openAfter[p + 1] as number) : this.ends.length;
      const partChars = this.openChars[p];
      const byteStart = this.openStarts[p] as number;
      // Where the part's k-th event (from 0) ends in it, in characters.
      const charEnd = partChars ? (k: number): number => partChars[k] as number : (k: number): number => this.ends.at(first + k) - byteStart;
      const i = seq - first;
      const j = Math.min(last, to) - first;
      const start = i === 0 ? 0 : charEnd(i - 1);
      for (let k = i; k < j; k++) ends.push(chars + charEnd(k) - start);
      const end = charEnd(j - 1);
      texts.push(i === 0 && end === text.length ? text : text.slice(start, end));
      chars += end - start;
      seq = first + j;
    }
    return { text: texts.length === 1 ? (texts[0] as string) : texts.join(""), ends };
  }
}

/** Where each event of a part ends in bytes, given where it ends in characters. */
function byteEnds(text: string, ends: readonly number[], bytes: number): readonly number[] {
  if (bytes === text.length) return ends;
  const out: number[] = [];
  let at = 0;
  let from = 0;
  for (const end of ends) {
    at += Buffer.byteLength(text.slice(from, end), "utf8");
    out.push(at);
    from = end;
  }
  return out;
}
