import { cloneJson, measure, type Json, type JsonObject, type Path } from "../core/index.js";
import { ClientApply, decide } from "./client-apply.js";
import { finding, type At, type Finding, type OpFinding, type Outcome } from "./findings.js";
import { Lifecycle } from "./lifecycle.js";
import { Messages, type Activity } from "./messages.js";
import { PASSED, RepairApply, type Policy, type Shared, type Step } from "./repair-apply.js";
import { enforceStage, patchKey, transport, verifyStage, type Decision } from "./stages.js";
import { NONE, Tally, type Summary } from "./tally.js";
import { Untouched } from "./untouched.js";

export { PASSTHROUGH, type Policy, type Step } from "./repair-apply.js";
export type { Mend, RunIds } from "./lifecycle-repair.js";
import type { Mend, RunIds } from "./lifecycle-repair.js";
export type { Summary } from "./tally.js";

/**
 * The one model of @ag-ui/client 1.0.0 reading a stream: the stages of
 * stages.ts (transport, enforce, verify), then the apply stage. Without a
 * repair policy (`check`) the apply stage is the client's own
 * (client-apply.ts); with one (`fix`, `proxy`) it writes what the client
 * should be sent instead (repair-apply.ts).
 */

export interface ClientOptions {
  /** What the client holds when the stream starts (default {}): its baseline. */
  state?: JsonObject;
  /**
   * Whether the baseline is what the client holds (default true). False when
   * nobody said (`check`, `fix` without --state): {} stands in for it, and
   * the first snapshot applied whole is SNAPSHOT_REPLACES_UNKNOWN (§13).
   */
  known?: boolean;
  /** The mirror may be behind the client (FixerOptions.resync): under --own, each run's first owned write resynchronizes. */
  resync?: boolean;
  /** `check --own`: the members the server owns, which a snapshot may replace without a `wiped` finding (§13). fix and proxy take them in `repair`. */
  own?: readonly Path[];
  /** The apply stage's repair policy; absent: apply as the client does (`check`). */
  repair?: Policy;
  /** How many ids of messages other than activities to remember (fix's bound on memory; check: all). */
  remember?: number;
  /**
   * fix: work out the client's verdict on each delta it mends (default true).
   * It copies the mirror, so a fix whose findings nobody reads skips it; its
   * exit status never depends on it.
   */
  diagnose?: boolean;
  /** The request's thread and run ids: what a RUN_STARTED the lifecycle repair sends carries. */
  run?: RunIds;
}

/** How deep Client.bytes walks a value: far past any real state, short of the stack's end. */
const MEASURE_DEPTH = 1000;

const IGNORED: Step = Object.freeze({ decision: "ignore", findings: NONE, out: undefined });

/** The apply stage in use: the client's own, or one with a repair policy. */
type Apply = { repairs: false; stage: ClientApply } | { repairs: true; stage: RepairApply };

export class Client {
  readonly messages: Messages;
  private readonly shared: Shared;
  private readonly apply: Apply;
  /** check: the fatal finding that ended the client's run; it applies nothing after it. */
  stopped: Finding | undefined;

  constructor(opts: ClientOptions = {}) {
    const state = opts.state ?? {};
    const repairs = opts.repair !== undefined;
    this.messages = new Messages(opts.remember);
    this.shared = { messages: this.messages, lifecycle: new Lifecycle(opts.remember), tally: new Tally(repairs), untouched: new Untouched(state, opts.known ?? true, opts.own), reader: repairs ? "fix" : "check" };
    this.apply =
      opts.repair === undefined
        ? { repairs: false, stage: new ClientApply(state, this.messages, this.shared.untouched, "check") }
        : { repairs: true, stage: new RepairApply(cloneJson(state), opts.repair, this.shared, opts.diagnose ?? true, opts.run, opts.remember, (opts.known ?? true) && opts.resync !== true) };
  }

  /** What the client holds now. */
  get state(): Json {
    return this.apply.repairs ? this.apply.stage.mirror.root : this.apply.stage.held;
  }

  get activities(): ReadonlyMap<string, Activity> {
    return this.messages.activities;
  }

  /**
   * The approximate JSON size of what the model holds: the state (fix: its
   * mirror's running count) and each activity's content, measured now, each
   * walk stopped at MEASURE_DEPTH (an event's JSON may nest without bound).
   */
  get bytes(): number {
    let bytes = this.apply.repairs ? this.apply.stage.mirror.bytes : measure(this.apply.stage.held, MEASURE_DEPTH).bytes;
    for (const a of this.messages.activities.values()) bytes += measure(a.content, MEASURE_DEPTH).bytes;
    return bytes;
  }

  get summary(): Summary {
    return this.shared.tally.summary;
  }

  /** The findings by what the reader did with them. */
  get outcomes(): Readonly<Record<Outcome, number>> {
    return this.shared.tally.outcomes;
  }

  /** fix: findings about events that went out as they came and still fail or warn on the client. */
  get unfixed(): number {
    return this.shared.tally.unfixed;
  }

  /** The first event's type, once it came ("" when it has none or is no JSON object). */
  firstType: string | undefined;

  /** The client's transport gave up before the event (check's SSE buffer limit): its run fails here. */
  overflow(line: number, f: Omit<OpFinding, "index" | "pointer">): Finding | undefined {
    if (this.stopped) return undefined;
    const out = this.shared.tally.count(finding({ event: ++this.summary.events, line, type: "" }, "fatal", f));
    this.stopped = out;
    return out;
  }

  /** The stream ended (fix): what the lifecycle repair sends last, if anything; at the line after the input's last. */
  end(line: number): Mend | undefined {
    if (!this.apply.repairs) return undefined;
    return this.apply.stage.end({ event: Math.max(1, this.summary.events), line, type: "" });
  }

  /** One event's data (starting on `line` of the input) through the pipeline. */
  feed(data: string, line: number): Step {
    const event = ++this.summary.events;
    if (event === 1) this.firstType = parsedType(data);
    // After a fatal finding the client's run has failed: it applies nothing more.
    if (this.stopped && !this.apply.repairs) return IGNORED;
    const t = transport(data, event, line);
    if (t.decision === "fatal") return this.refused(t.findings, "fatal");
    const key = patchKey(t.at.type);
    if (key !== undefined) this.summary.deltas++;
    return this.apply.repairs ? this.apply.stage.step(t.raw, t.at, key) : this.check(this.apply.stage, t.raw, t.at);
  }

  /** An event that passes on as it came although the client refuses it (fix), or that ends the run (check). */
  private refused(findings: readonly Finding[], decision: Decision): Step {
    const out = this.shared.tally.with(findings, "passed");
    if (!this.apply.repairs && decision === "fatal") this.stopped = out.find((f) => f.kind === "fatal");
    return { decision, findings: out, out: undefined };
  }

  /** check: the client's own stages, in its order, each deciding on the event. */
  private check(apply: ClientApply, raw: JsonObject, at: At): Step {
    const e = enforceStage(raw, at);
    if (e.decision === "drop" || e.decision === "fatal") return this.refused(e.findings, e.decision);
    const verified = verifyStage(this.shared.lifecycle, e.event, at, "feed");
    if (verified.decision === "fatal") return this.refused([...e.findings, ...verified.findings], "fatal");
    const kept = e.kept;
    const applied = apply.apply(e.event, at, kept ? (i) => kept[i] ?? i : (i) => i);
    if (applied.findings.length === 0 && e.findings.length === 0) return PASSED;
    const findings = this.shared.tally.with([...e.findings, ...applied.findings], "passed");
    const fatal = findings.find((f) => f.kind === "fatal");
    if (fatal) this.stopped = fatal;
    return { decision: decide(findings, e.decision), findings, out: undefined };
  }
}

/** An event's type as the transport stage reads it, or "" (the first event's only: one parse more per stream). */
function parsedType(data: string): string {
  try {
    const v: unknown = JSON.parse(data);
    const type = typeof v === "object" && v !== null ? (v as Record<string, unknown>)["type"] : undefined;
    return typeof type === "string" ? type : "";
  } catch {
    return "";
  }
}
