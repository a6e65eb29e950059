import { formatPointer } from "../core/index.js";
import { showText } from "./show.js";

/** Where JSON text stops being JSON (RFC 8259 §2): its line and column, and the pointer of the value being read there. */
export interface SyntaxErrorAt {
  /** 1-based. */
  line: number;
  /** 1-based, in UTF-16 code units. */
  column: number;
  /** RFC 6901: the value being read when the text went wrong ("" for the root). */
  pointer: string;
  message: string;
}

type Frame = { array: true; index: number } | { array: false; key: string | undefined };
type Want = "value" | "value-or-close" | "key" | "key-or-close" | "colon" | "comma-or-close" | "end";

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
/** A character as a message shows it: escaped when invisible, and a byte order mark named as one. */
const seen = (c: string): string => showText(c) + (c === "\ufeff" ? " (a byte order mark, U+FEFF)" : "");
const isSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * Finds the first place where `text` breaks RFC 8259's grammar, for a message
 * that names it. Only called once JSON.parse has refused the text, whose own
 * message on Node 20 gives no position for most errors. Iterative, so no
 * nesting runs it out of stack. Returns undefined for text that is JSON.
 */
export function locateSyntaxError(text: string): SyntaxErrorAt | undefined {
  const stack: Frame[] = [];
  const n = text.length;
  let want: Want = "value";
  let i = 0;
  const fail = (message: string): SyntaxErrorAt => {
    const before = text.slice(0, i);
    const line = before.split("\n").length;
    const path = stack.flatMap((f) => (f.array ? [String(f.index)] : f.key === undefined ? [] : [f.key]));
    return { line, column: i - before.lastIndexOf("\n"), pointer: formatPointer(path), message };
  };
  const afterValue = (): Want => (stack.length === 0 ? "end" : "comma-or-close");
  /** RFC 8259 §7: returns the index after the closing quote, or -1. */
  const stringEnd = (from: number): number => {
    for (let j = from + 1; j < n; j++) {
      const c = text.charCodeAt(j);
      if (c === 0x22) return j + 1;
      if (c < 0x20) return -1;
      if (c === 0x5c) {
        const e = text[j + 1];
        if (e === "u" && /^[0-9a-fA-F]{4}$/.test(text.slice(j + 2, j + 6))) j += 5;
        else if (e !== undefined && '"\\/bfnrt'.includes(e)) j++;
        else return -1;
      }
    }
    return -1;
  };
  for (;;) {
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    if (i >= n) return want === "end" ? undefined : fail("the text ends before the value does");
    const c = text[i] as string;
    const top = stack[stack.length - 1];
    if (want === "end") return fail(`unexpected ${seen(c)} after the value`);
    if ((want === "value-or-close" && c === "]") || (want === "key-or-close" && c === "}")) {
      stack.pop();
      i++;
      want = afterValue();
    } else if (want === "value" || want === "value-or-close") {
      if (c === "{" || c === "[") {
        stack.push(c === "[" ? { array: true, index: 0 } : { array: false, key: undefined });
        want = c === "[" ? "value-or-close" : "key-or-close";
        i++;
      } else if (c === '"') {
        const end = stringEnd(i);
        if (end === -1) return fail("a string that is not closed, or holds a raw control character or a bad escape");
        i = end;
        want = afterValue();
      } else {
        NUMBER.lastIndex = i;
        const literal = NUMBER.test(text) ? NUMBER.lastIndex - i : ["true", "false", "null"].find((w) => text.startsWith(w, i))?.length;
        if (literal === undefined) return fail(`unexpected ${seen(c)} where a value belongs`);
        i += literal;
        want = afterValue();
      }
    } else if (want === "key" || want === "key-or-close") {
      const end = c === '"' ? stringEnd(i) : -1;
      if (end === -1) return fail(`expected a member name in double quotes, found ${seen(c)}`);
      if (top && !top.array) top.key = JSON.parse(text.slice(i, end)) as string;
      i = end;
      want = "colon";
    } else if (want === "colon") {
      if (c !== ":") return fail(`expected ":" after the member name, found ${seen(c)}`);
      i++;
      want = "value";
    } else if (top) {
      const close = top.array ? "]" : "}";
      if (c === close) {
        stack.pop();
        i++;
        want = afterValue();
      } else if (c === ",") {
        i++;
        if (top.array) {
          top.index++;
          want = "value";
        } else {
          top.key = undefined;
          want = "key";
        }
      } else return fail(`expected "," or "${close}", found ${seen(c)}`);
    }
  }
}
