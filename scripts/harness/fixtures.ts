import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

/** The project root. */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** Vendored conformance data (see test/fixtures/README.md for sources and licenses). */
export const FIXTURES = path.join(ROOT, "test/fixtures");

export function readFixture<T>(rel: string): T {
  return JSON.parse(readFileSync(path.join(FIXTURES, rel), "utf8")) as T;
}
