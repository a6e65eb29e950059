/**
 * Characters a message must not print as they are: controls (Cc), format
 * characters (Cf: U+FEFF, the byte order mark; zero-width and bidi marks),
 * line and paragraph separators, and every space but U+0020. Printed raw they
 * are invisible, or move the text around them, and a message that quotes one
 * shows the user nothing (a BOM quoted raw looks like `""`). JSON.stringify escapes only C0
 * controls, `"` and `\`, and lone surrogates.
 */
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Zs}]/gu;

const escape = (c: string): string => (c === " " ? c : "\\u" + (c.codePointAt(0) as number).toString(16).padStart(4, "0"));

/** `text` with every character HIDDEN matches written as `\uXXXX`, and nothing else changed. */
export const escapeHidden = (text: string): string => text.replace(HIDDEN, escape);

/**
 * User text quoted for a message, the way a JSON string is written, with
 * every invisible character as `\uXXXX` (a BOM is `"\ufeff"`), and cut at
 * `max` UTF-16 code units (never inside a surrogate pair) with `…` after the
 * closing quote.
 */
export function showText(text: string, max = 64): string {
  let head = text;
  if (text.length > max) {
    let end = max;
    const last = text.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    head = text.slice(0, end);
  }
  return escapeHidden(JSON.stringify(head)) + (head.length < text.length ? "…" : "");
}
