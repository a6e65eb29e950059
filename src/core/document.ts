import { NO_LIMITS, mark, newDoc, rollback, type Doc, type Mark, type Undo } from "./apply.js";
import type { Decoded } from "./decode.js";
import type { FailedOp, OpError } from "./errors.js";
import type { Json } from "./json.js";
import { applyNormalized, type ApplyOptions, type Rules } from "./normalize.js";
import type { ChangeOp, Op } from "./ops.js";
import { applyAtomic, applyLenient, type Patched } from "./patch.js";
import type { Result } from "./result.js";

/**
 * A JSON document that changes only through RFC 6902 ops: the core's one
 * public way to hold and patch a state (a thread's state, an activity's
 * content, fix's mirror). Its byte count, nesting bound and undo log are the
 * engine's (apply.ts) and stay behind this class, so no caller can leave them
 * out of step with the root; every change is an op, applied in place.
 */

/** What a transaction's body may do: read the document, and apply ops to it. */
export interface Writer {
  /** The document as it stands, with every op applied so far in the transaction. */
  readonly root: Json;
  /**
   * Applies one op with the rules of protocol/README.md §5 (rules 2 and 3
   * when the transaction's `normalize` is on). On failure nothing has changed
   * and the error is returned. What was applied (inserted ops included, `test`
   * ops and moves onto themselves left out) is appended to `applied`.
   */
  apply(op: Op, applied?: ChangeOp[]): OpError | undefined;
}

type Options = Rules;

// One op at a time keeps an op that changes nothing (§5 rule 8 is for whole patches, patch.ts).
const DEFAULTS: Options = { limits: NO_LIMITS, normalize: true, adopt: false, skipEqual: false };
const withDefaults = (o: ApplyOptions | undefined): Options => (o === undefined ? DEFAULTS : { limits: o.limits ?? NO_LIMITS, normalize: o.normalize ?? true, adopt: o.adopt ?? false, skipEqual: false });

export class JsonDocument {
  private readonly doc: Doc;
  /** Whether a transaction is open: the document then changes only through its writer. */
  private busy = false;

  /** Takes `root` as it is, without copying it: the caller hands it over. */
  constructor(root: Json = {}) {
    this.doc = newDoc(root);
  }

  /** The document as it stands. It is the document's own value: read it, never change it. */
  get root(): Json {
    return this.doc.root;
  }

  /** Its approximate JSON size, as `--max-state-bytes` and `stats` count it (measure.ts). */
  get bytes(): number {
    return this.doc.bytes;
  }

  /** One op, applied at once (§5 rules as `options` say); on failure the document is as it was. */
  apply(op: Op, options?: ApplyOptions): OpError | undefined {
    this.idle();
    return applyNormalized(this.doc, op, withDefaults(options), [], []);
  }

  /** protocol/README.md §5 rule 4: each op applies or is skipped and reported; later ops go on. */
  applyLenient<R>(ops: readonly Decoded[], raw: readonly R[], options?: ApplyOptions): Patched<R> {
    this.idle();
    return applyLenient(this.doc, ops, raw, options);
  }

  /** RFC 6902 §5: all ops apply or none; the error names the first that did not. */
  applyAtomic(ops: readonly Decoded[], options?: ApplyOptions): Result<ChangeOp[], FailedOp> {
    this.idle();
    return applyAtomic(this.doc, ops, options);
  }

  /**
   * Runs `body` against the document as one change: when it returns an
   * error (or throws), every op it applied is undone and the document is as
   * it was; otherwise what it applied stands. The result is `body`'s, so a
   * body can roll back and still hand back what it found out.
   */
  transaction<T, E>(body: (w: Writer) => Result<T, E>, options?: ApplyOptions): Result<T, E> {
    this.idle();
    const tx = new Transaction(this.doc, withDefaults(options));
    this.busy = true;
    let out: Result<T, E> | undefined;
    try {
      out = body(tx);
    } finally {
      this.busy = false;
      tx.close(out === undefined || !out.ok);
    }
    return out;
  }

  /** A change made beside an open transaction would be lost to, or undone by, its rollback. */
  private idle(): void {
    if (this.busy) throw new Error("the document is in a transaction: change it through the transaction's writer");
  }
}


/** The writer of one open transaction: a class, not closures, since fix opens one per delta. */
class Transaction implements Writer {
  private readonly undo: Undo[] = [];
  private readonly before: Mark;
  private open = true;

  constructor(
    private readonly doc: Doc,
    private readonly opts: Options,
  ) {
    this.before = mark(doc);
  }

  get root(): Json {
    return this.doc.root;
  }

  apply(op: Op, applied: ChangeOp[] = []): OpError | undefined {
    if (!this.open) throw new Error("a transaction's writer was used after the transaction ended");
    return applyNormalized(this.doc, op, this.opts, this.undo, applied);
  }

  /** Ends the transaction: what it applied stands, or is undone (`rollBack`). */
  close(rollBack: boolean): void {
    this.open = false;
    if (rollBack) rollback(this.doc, this.undo, 0, this.before);
  }
}
