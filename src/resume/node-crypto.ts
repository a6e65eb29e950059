// A type only: the module itself is loaded at first use, below.
import type * as Crypto from "node:crypto";

/**
 * Node's crypto module, loaded at first use rather than at start: a sidecar that never files a run
 * never pays for it at start (src/json/stringify.ts keeps Web Crypto out of the start the same way).
 */
let loaded: typeof Crypto | undefined;
export const nodeCrypto = (): typeof Crypto => (loaded ??= process.getBuiltinModule("node:crypto"));
