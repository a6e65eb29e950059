import { hasKind, noKinds, noOutcomes, type Finding, type Kind, type Outcome, type Reported } from "./findings.js";

/** The summary of a stream: events read, of them deltas, and how many events had a finding of each kind. */
export interface Summary {
  events: number;
  deltas: number;
  dropped: number;
  ignored: number;
  fatal: number;
  wiped: number;
}

/** No findings: shared, and never written to. */
export const NONE: readonly Finding[] = Object.freeze([]);

/**
 * The counts of a stream's findings (protocol/README.md §13): each event
 * once per kind in `summary`, every finding by its outcome, and for a
 * repairing reader the findings about events that went out as they came.
 * Every finding a reading reports passes through `count` once.
 */
export class Tally {
  readonly summary: Summary = { events: 0, deltas: 0, dropped: 0, ignored: 0, fatal: 0, wiped: 0 };
  readonly outcomes: Record<Outcome, number> = noOutcomes();
  /** fix: findings about events that went out as they came and still fail or warn on the client. */
  unfixed = 0;
  /** The last event each kind was counted for: an event counts once per kind. */
  private readonly counted: Record<Kind, number> = noKinds();

  constructor(private readonly repairs: boolean) {}

  count<F extends Reported>(f: F): F {
    const kind = hasKind(f) ? f.kind : undefined;
    if (kind !== undefined && this.counted[kind] !== f.event) {
      this.counted[kind] = f.event;
      this.summary[kind]++;
    }
    this.outcomes[f.outcome]++;
    if (this.repairs && f.outcome === "passed" && kind !== undefined && kind !== "wiped") this.unfixed++;
    return f;
  }

  /** Counts each finding with `outcome`. */
  with(fs: readonly Finding[], outcome: Outcome): readonly Finding[] {
    if (fs.length === 0) return NONE;
    return fs.map((f) => this.count(f.outcome === outcome ? f : { ...f, outcome }));
  }
}
