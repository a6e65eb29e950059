/**
 * A number written as a float (with a fraction or an exponent) whose value is
 * a whole number: `1.0`, `-0.0`, `1e2`, `1.5e3`, `1e-400` (which is 0).
 *
 * JavaScript has one kind of number, so `JSON.parse` gives 1, 0, 100 for
 * these and `JSON.stringify` writes them back as `1`, `0`, `100`, which
 * Python's json, Go's encoding/json (UseNumber) and Clojure's data.json read
 * as integers: the value kept, the kind lost (protocol/README.md §3, Numbers).
 * The parser (src/json/parse.ts) leaves one of these in such a token's place;
 * the core treats it as the number it holds, a scalar, never a container:
 * - JSON equality compares its value: `1` equals `1.0` (equal.ts);
 * - a copy shares it, since it never changes (json.ts cloneJson);
 * - its size is the length of its text (measure.ts);
 * - a path cannot go through it (json.ts isObject is false for it).
 *
 * Abstract: how it is written back (toJSON) is the encoder's business
 * (src/json/stringify.ts), so the core holds no output state of its own and a
 * bare instance can never be written as an object by mistake.
 */
export abstract class IntegralFloat {
  /** Its JSON text as a float: the integer's digits and `.0`, with `-0.0` for negative zero. */
  readonly text: string;

  /** `value` must be a whole number below 1e21 in size: above that, JavaScript writes an exponent, a float to every reader. */
  constructor(readonly value: number) {
    this.text = `${Object.is(value, -0) ? "-0" : String(value)}.0`;
  }

  /** What JSON.stringify writes for it; the encoder turns that into `text`. */
  abstract toJSON(): string;
}

/** The number a JSON value holds, if it is one: a number, or an IntegralFloat's value. */
export function numberIn(v: unknown): number | undefined {
  return typeof v === "number" ? v : v instanceof IntegralFloat ? v.value : undefined;
}
