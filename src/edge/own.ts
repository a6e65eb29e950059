import { err, forbidden, ok, parsePointer, type Path, type Result } from "../core/index.js";

/** Why a pointer cannot name an owned member: the reason code openStream answers with, and the words. */
export interface OwnProblem {
  /** Which of the pointers, from 0. */
  index: number;
  reason: "INVALID_POINTER" | "FORBIDDEN_KEY";
  /** Said the same by the command line (`--own: ...`) and the RPC (`own: ...`). */
  message: string;
}

/**
 * The members a server owns (protocol/README.md §13), read once for `check`, `fix` and `proxy`'s
 * `--own` and openStream's `own`: each a JSON Pointer to a member, never the root, and never through
 * a key no op may name (§3: `__proto__`, `constructor/prototype`), since no delta could then say what
 * the server writes there (a snapshot's value there is reported, wiped and kept, instead).
 */
export function ownedMembers(pointers: readonly string[]): Result<Path[], OwnProblem> {
  const own: Path[] = [];
  for (const [index, pointer] of pointers.entries()) {
    const parsed = parsePointer(pointer);
    if (!parsed.ok || parsed.value.length === 0) return err({ index, reason: "INVALID_POINTER", message: `expected a JSON Pointer to a member (such as /toolState), got ${JSON.stringify(pointer)}` });
    if (forbidden(parsed.value)) return err({ index, reason: "FORBIDDEN_KEY", message: `${JSON.stringify(pointer)} goes through a key no op may name (__proto__, constructor/prototype): a delta cannot write it, so the server cannot own it; a snapshot's value there is reported (wiped, kept) and the client's stands` });
    own.push(parsed.value);
  }
  return ok(own);
}
