import { IntegralFloat } from "../core/index.js";

/**
 * JSON.stringify that writes an IntegralFloat (src/core/float.ts) as float
 * text, `1.0` rather than `1`, so a number goes back out of the kind it came
 * in (protocol/README.md §3, Numbers).
 *
 * JSON.stringify cannot write raw text on Node 20 (JSON.rawJSON came later),
 * and a replacer function would slow every call. So a Float's toJSON gives a
 * string that carries its text behind a tag drawn at random once per process,
 * and the tagged strings are swapped for their text afterwards. A count of
 * toJSON calls tells whether a call wrote any: text without a Float pays one
 * comparison. The tag is made of characters JSON.stringify writes as they
 * are and is never written out, so a caller's string could hold it only by
 * guessing 64 random bits (and would then only turn into a number).
 */
let tag: { text: string; tagged: RegExp } | undefined;

/**
 * Drawn at the first Float written, not at start: Web Crypto's first use
 * loads Node's crypto modules, which would lengthen every start for the
 * messages that never hold a whole float.
 */
function theTag(): { text: string; tagged: RegExp } {
  if (tag === undefined) {
    const text = `agui-state-float-${random64()}:`;
    tag = { text, tagged: new RegExp(`"${text}(-?[0-9]+\\.0)"`, "g") };
  }
  return tag;
}

let written = 0;

/** The IntegralFloat that parseJson makes: it writes itself through the tag. */
export class Float extends IntegralFloat {
  override toJSON(): string {
    written++;
    return theTag().text + this.text;
  }
}

/** JSON.stringify(value), with every IntegralFloat written as float text. */
export function stringifyJson(value: unknown): string {
  const before = written;
  const text = JSON.stringify(value);
  return written === before ? text : untag(text);
}

/**
 * For an encoder that builds its text from several JSON.stringify calls
 * (src/rpc/common/encode.ts): take a mark before, and pass it with the whole
 * text to finishFloats after.
 */
export const floatMark = (): number => written;

/** The text with its tagged Floats written as float text, if any were written since `mark`. */
export const finishFloats = (mark: number, text: string): string => (written === mark ? text : untag(text));

const untag = (text: string): string => text.replace(theTag().tagged, "$1");

/** The Web Crypto global (in Node 20 and browsers alike): this layer imports no Node module. */
function random64(): string {
  return Array.from(crypto.getRandomValues(new Uint32Array(2)), (n) => n.toString(16).padStart(8, "0")).join("");
}
