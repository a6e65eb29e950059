import type { Operation } from "fast-json-patch";
import { parsePointer, type Json, type JsonObject, type Path } from "../core/index.js";
import { SNAPSHOT_TEXT, TEXT, finding, type At, type Finding, type Outcome, type Reader } from "./findings.js";
import { wipes } from "./snapshots.js";

/**
 * The members of the client's baseline (what it held when the stream
 * started) that no event of the stream has set yet: a snapshot that removes
 * or replaces one of them wipes it (protocol/README.md §13, `wiped`). A
 * member set by the stream, or once wiped, is the server's from then on.
 * When the baseline is not known (`check` and `fix` without --state), the
 * first snapshot the client applies whole replaces members no event of the
 * stream set, whatever they are (SNAPSHOT_REPLACES_UNKNOWN); after it, the
 * client holds what the stream sent.
 */
export class Untouched {
  private readonly members: Set<string>;
  /** Whether the client may hold members nobody here knows of: the baseline was not given, and no snapshot has replaced it. */
  private unknown: boolean;

  constructor(
    baseline: JsonObject,
    known = true,
    /** `check --own` (§13): the members the server owns, whose values a snapshot may replace without a finding. */
    private readonly own: readonly Path[] = [],
  ) {
    this.members = new Set(Object.keys(baseline));
    this.unknown = !known;
  }

  /**
   * A STATE_SNAPSHOT the client applies whole: SNAPSHOT_REPLACES_UNKNOWN
   * while what it held is not known, once (from then on it holds what the
   * stream sent). `quiet`: the snapshot has a finding that says more (one
   * that is not an object), so it only makes the state known.
   */
  replaced(at: At, reader: Reader, outcome: Outcome, quiet = false): Finding | undefined {
    if (!this.unknown) return undefined;
    this.unknown = false;
    return quiet ? undefined : finding(at, "wiped", SNAPSHOT_TEXT.replacesUnknown(reader), outcome);
  }

  get empty(): boolean {
    return this.members.size === 0;
  }

  /** A write at `path`: the root member it is in is the server's now (the root itself: all of them). */
  touch(path: Path): void {
    if (path.length === 0) this.members.clear();
    else if (path[0] !== undefined) this.members.delete(path[0]);
  }

  /** Root members the ops as the client applied them write (fast-json-patch's ops, pointers as sent). */
  written(ops: readonly Operation[]): void {
    if (this.members.size === 0) return;
    for (const op of ops) {
      for (const p of op.op === "move" ? [op.path, op.from] : [op.path]) {
        const parsed = parsePointer(p);
        if (parsed.ok) this.touch(parsed.value);
      }
    }
  }

  /** The `wiped` findings of a snapshot the client applies over `held`; the members it set are the server's after it. */
  wiped(held: Json, snapshot: Json, at: At, outcome: Outcome): Finding[] {
    if (this.members.size === 0) return [];
    const lost = wipes(held, snapshot, (name) => this.members.has(name), this.own);
    for (const w of lost) this.members.delete(w.name);
    return lost.map((w) => finding(at, "wiped", TEXT.wiped(w.pointer, w.change, false), outcome));
  }
}
