import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

/** The project root, and `../shared` beside it, where the conformance suites are read in place. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const SHARED = path.resolve(ROOT, "../shared");

export function readShared<T>(rel: string): T {
  return JSON.parse(readFileSync(path.join(SHARED, rel), "utf8")) as T;
}
