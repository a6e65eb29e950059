import { UsageError } from "./usage-error.js";

/** A number of bytes as flags take it: digits with an optional K, M or G (powers of 1024). Throws UsageError below `min`. */
export function parseSize(flag: string, text: unknown, min: number): number {
  const m = /^(\d{1,12})([KMG]?)$/i.exec(String(text));
  const n = m ? Number(m[1]) * 1024 ** " KMG".indexOf((m[2] || " ").toUpperCase()) : NaN;
  if (!(n >= min)) throw new UsageError(`--${flag}: expected a number of bytes of at least ${min}, with an optional K, M or G, got ${JSON.stringify(text)}`);
  return n;
}

/** A number of seconds as flags take it (a decimal fraction allowed), in ms. Throws UsageError otherwise. */
export function parseSeconds(flag: string, text: unknown): number {
  const s = String(text);
  const n = /^\d{1,9}(\.\d{1,3})?$/.test(s) ? Number(s) : NaN;
  if (!Number.isFinite(n)) throw new UsageError(`--${flag}: expected a number of seconds, got ${JSON.stringify(s)}`);
  return Math.round(n * 1000);
}
