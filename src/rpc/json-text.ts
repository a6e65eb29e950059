/**
 * JSON.parse that keeps integers a double cannot hold from being silently
 * changed (PROTOCOL §3). An integer literal beyond ±(2^53 - 1), such as a
 * Python id 12345678901234567890, is replaced by an UnsafeInteger marker that
 * carries its source text, so the params scan can refuse it and name its
 * path. Floats (with a fraction or an exponent, as Python writes 6.02e23) are
 * doubles on both ends and pass unchanged.
 *
 * Only a message with a run of 16 or more digits is looked at again, by a
 * small tokenizer over the text. (JSON.parse's source-text access would do it,
 * but on Node 20 it needs a V8 flag that, set at run time, slowed every
 * JSON.parse in the process by a third in our measurements.)
 */
export class UnsafeInteger {
  constructor(readonly source: string) {}
}

const LONG_DIGITS = /\d{16}/;
const INTEGER_LITERAL = /^-?\d{16,}$/;

/** Whether text has a digit run long enough to be an unsafe integer; parseJson checks only such text. */
export const mayHoldUnsafeInteger = (text: string): boolean => LONG_DIGITS.test(text);

/** Parses JSON text; throws SyntaxError like JSON.parse. */
export function parseJson(text: string, check = mayHoldUnsafeInteger(text)): unknown {
  const value: unknown = JSON.parse(text);
  if (!check) return value;
  let out = value;
  for (const { path, source } of unsafeIntegers(text)) {
    if (path.length === 0) return new UnsafeInteger(source);
    let parent = out as Record<string, unknown>;
    for (let i = 0; i < path.length - 1; i++) parent = parent[path[i] as string] as Record<string, unknown>;
    parent[path[path.length - 1] as string] = new UnsafeInteger(source);
    out = value;
  }
  return out;
}

type Level = { array: true; index: number } | { array: false; key: string; expectKey: boolean };

/** Integer literals beyond ±(2^53 - 1) in valid JSON text, with their paths. */
export function unsafeIntegers(text: string): { path: string[]; source: string }[] {
  const found: { path: string[]; source: string }[] = [];
  const stack: Level[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      let j = i + 1;
      while (j < n) {
        const d = text.charCodeAt(j);
        if (d === 0x5c) j += 2;
        else if (d === 0x22) break;
        else j++;
      }
      const top = stack[stack.length - 1];
      if (top && !top.array && top.expectKey) {
        top.key = JSON.parse(text.slice(i, j + 1)) as string;
        top.expectKey = false;
      }
      i = j + 1;
    } else if (c === 0x7b) {
      stack.push({ array: false, key: "", expectKey: true });
      i++;
    } else if (c === 0x5b) {
      stack.push({ array: true, index: 0 });
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      stack.pop();
      i++;
    } else if (c === 0x2c) {
      const top = stack[stack.length - 1];
      if (top?.array) top.index++;
      else if (top) top.expectKey = true;
      i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      let j = i + 1;
      while (j < n && isNumberChar(text.charCodeAt(j))) j++;
      const token = text.slice(i, j);
      if (INTEGER_LITERAL.test(token) && !Number.isSafeInteger(Number(token))) {
        found.push({ path: stack.map((l) => (l.array ? String(l.index) : l.key)), source: token });
      }
      i = j;
    } else i++;
  }
  return found;
}

function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}
