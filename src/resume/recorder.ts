import type { Log } from "../log.js";
import type { CredentialPolicy } from "./credentials.js";
import { newRun, openingId, RunIds } from "./ids.js";
import type { RunEnd, RunLog } from "./log.js";
import { Stamper, type StampedPart } from "./stamp.js";

/** How a server keeps runs for rejoins (protocol/README.md §16): the proxy's and the stream methods' alike. */
export interface ResumeOptions {
  log: RunLog;
  /** The key credentials are hashed under (credentials.ts): from the operator's secret, never from the store. */
  key: Buffer;
  /** What makes a request's credential, and whether anonymous runs may be reloaded (credentials.ts). */
  policy: CredentialPolicy;
  /** How long a run goes on after its client left, waiting for a rejoin, in ms; 0 cancels it at once, as before resume. */
  graceMs: number;
}

/**
 * One run as it streams, for the proxy (proxy/sse.ts) and the stream methods (service/stream-service.ts)
 * alike: stamps each event's id, logs it, and, when the client leaves before the end, keeps the run
 * going until a grace period passes with nobody reading it; then it ends the run as cancelled and
 * calls `cancel` (the proxy aborts its upstream request; the sidecar tells the middleware in its next
 * fixStream reply).
 */
export class Recorder {
  private readonly ids = new RunIds(newRun());
  private readonly stamper = new Stamper(this.ids);
  /** The run's handle, the first part of each of its ids. */
  readonly run = this.ids.run;
  /**
   * The id of the answer's opening block, number 0 with a nonce of its own. An `id` field with no
   * `data` sets the client's last event ID and dispatches nothing (HTML Standard, "Interpreting an
   * event stream": dispatch sets the last event ID string, then returns on an empty data buffer;
   * @ag-ui/client's parser skips a block without data). So a client cut before the first event still
   * holds an id to rejoin from (protocol/README.md §16).
   */
  readonly opening = openingId(this.run);
  private done = false;
  private timer: NodeJS.Timeout | undefined;
  /** Whether the client left and the run goes on without it. */
  detached = false;

  constructor(
    private readonly log: RunLog,
    private readonly graceMs: number,
    private readonly cancel: () => void,
    private readonly logger: Log | undefined,
  ) {}

  get events(): number {
    return this.ids.seq;
  }

  /** The block an answer starts with, before any event and right after its head: the opening id alone. */
  get openingBlock(): string {
    return `id: ${this.opening}\n\n`;
  }

  get upstreamIds(): number {
    return this.stamper.upstreamIds;
  }

  /** Whether the run's log takes no more events (it ended, was cancelled, or became unresumable). */
  get ended(): boolean {
    return this.done;
  }

  /** The client's text for one part of the repaired stream. */
  part(text: string): string {
    return this.keep(this.stamper.push(text));
  }

  /** The same for a part given as the fixer's items (StreamFixer#pushEach): the proxy's way, which spares finding the blocks again. */
  items(texts: readonly string[]): string {
    return this.keep(this.stamper.pushEach(texts));
  }

  private keep(p: StampedPart): string {
    if (p.ends.length > 0) this.log.append(this.run, { text: p.events, ends: p.ends });
    if (this.stamper.passing) this.finish("unresumable");
    return p.text;
  }

  /** The stream's end as its upstream ended it. */
  end(): string {
    const out = this.stamper.end().text;
    this.finish("finished");
    return out;
  }

  finish(reason: RunEnd): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.log.end(this.run, reason);
  }

  /** The client left before the end: true when the run goes on, detached, for the grace period. */
  detach(): boolean {
    if (this.done || this.graceMs === 0) return false;
    if (this.detached) return true;
    this.detached = true;
    this.arm();
    return true;
  }

  /** At the end of each grace period: a run somebody reads goes on; one nobody reads is cancelled. */
  private arm(): void {
    this.timer = setTimeout(() => {
      void this.log.readers(this.run).then(
        (n) => {
          if (this.done) return;
          if (n > 0) return this.arm();
          this.logger?.info({ run: this.run, graceMs: this.graceMs, events: this.ids.seq }, "nobody rejoined within the grace period; cancelling the run");
          this.finish("cancelled");
          this.cancel();
        },
        () => this.arm(),
      );
    }, this.graceMs);
    // A detached run must not hold the process open on its own: shutdown cuts it.
    this.timer.unref();
  }
}
