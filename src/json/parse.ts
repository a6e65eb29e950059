/**
 * JSON.parse that keeps numbers from being silently changed (protocol/README.md §3).
 * - An integer literal that a double cannot hold exactly, such as a Python
 *   id 12345678901234567890 (it would read back as 12345678901234567000).
 *   Integers a double does hold, such as 2^53 or 10^20, pass.
 * - A literal beyond a double's range, such as 1e400, would parse to
 *   Infinity and be sent on as null.
 * Either is replaced by an UnsafeNumber marker that carries its source text,
 * so the params scan can refuse it and name its path. Floats (with a fraction
 * or an exponent, as Python writes 6.02e23) are doubles on both ends and pass
 * unchanged.
 *
 * Only a message with a run of 16 or more digits, or an exponent of three
 * digits, is looked at again, by a small tokenizer over the text. (JSON.parse's source-text access would do it,
 * but on Node 20 it needs a V8 flag that, set at run time, slowed every
 * JSON.parse in the process by a third in our measurements.)
 */
export class UnsafeNumber {
  constructor(
    readonly source: string,
    /** Beyond a double's range, rather than an integer beyond 2^53. */
    readonly overflow: boolean,
  ) {}
}

const SUSPECT = /\d{16}|[eE]\+?\d{3}/;
const INTEGER_LITERAL = /^-?\d{16,}$/;

/** Whether text may hold a number a double would change; parseJson looks again only at such text. */
export const mayHoldUnsafeNumber = (text: string): boolean => SUSPECT.test(text);

const own = Object.prototype.hasOwnProperty;

/** Parses JSON text; throws SyntaxError like JSON.parse. */
export function parseJson(text: string, check = mayHoldUnsafeNumber(text)): unknown {
  const value: unknown = JSON.parse(text);
  if (!check) return value;
  let root = value;
  for (const { path, source, overflow } of unsafeNumbers(text)) {
    const marker = new UnsafeNumber(source, overflow);
    if (path.length === 0) {
      root = marker;
      continue;
    }
    // Follow own members only, and mark only a number that is still there:
    // with a repeated member name, JSON.parse kept the last value and the
    // literal may sit in one it dropped (whose path can even name __proto__).
    let parent: unknown = value;
    for (let i = 0; i < path.length - 1 && parent !== undefined; i++) {
      parent = typeof parent === "object" && parent !== null && own.call(parent, path[i] as string) ? (parent as Record<string, unknown>)[path[i] as string] : undefined;
    }
    const key = path[path.length - 1] as string;
    if (typeof parent !== "object" || parent === null || !own.call(parent, key)) continue;
    const current = (parent as Record<string, unknown>)[key];
    if (typeof current === "number" && (current === Number(source) || Number.isNaN(current))) {
      Object.defineProperty(parent, key, { value: marker, writable: true, enumerable: true, configurable: true });
    }
  }
  return root;
}

type Level = { array: true; index: number } | { array: false; key: string; expectKey: boolean };

/** Number literals a double would change, in valid JSON text, with their paths. */
export function unsafeNumbers(text: string): { path: string[]; source: string; overflow: boolean }[] {
  const found: { path: string[]; source: string; overflow: boolean }[] = [];
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
      const value = Number(token);
      const overflow = !Number.isFinite(value);
      // An integer the double holds exactly (9007199254740992, 10^20) is kept:
      // it will be written back as the same number.
      if (overflow || (INTEGER_LITERAL.test(token) && !Number.isSafeInteger(value) && BigInt(token) !== BigInt(value))) {
        found.push({ path: stack.map((l) => (l.array ? String(l.index) : l.key)), source: token, overflow });
      }
      i = j;
    } else i++;
  }
  return found;
}

function isNumberChar(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d;
}
