import { LIMIT_FLAGS } from "./options.js";
import { DEFAULT_LIMITS } from "../protocol/limits.js";
import { METHOD_PARAMS } from "../protocol/types.js";

const limitLines = LIMIT_FLAGS.map((l) => `  --${l.flag} N`.padEnd(30) + `default ${DEFAULT_LIMITS[l.key]}`.padEnd(20) + `env ${l.env}`).join("\n");

/** Every method the document defines, wrapped: the generated table is the one list. */
const methodLines = Object.keys(METHOD_PARAMS)
  .reduce<string[]>((lines, m) => {
    const last = lines[lines.length - 1];
    if (last !== undefined && last.length + m.length + 1 <= 76) lines[lines.length - 1] = `${last} ${m}`;
    else lines.push(`  ${m}`);
    return lines;
  }, [])
  .join("\n");

const HELP = {
  main: `agui-state: a sidecar that keeps a mirror of each AG-UI thread's shared state
and returns STATE_DELTA events that always apply on the client.

Usage:
  agui-state [serve] [flags]          serve JSON-RPC 2.0 on stdin/stdout (the sidecar)
  agui-state normalize [--state FILE] [--strict] [OPS_FILE|-]
  agui-state diff OLD.json NEW.json
  agui-state escape SEGMENT...
  agui-state parse POINTER
  agui-state help [COMMAND]           this text, or a command's
  agui-state --version

Run "agui-state help serve" for the flags, limits and environment variables.

Examples:
  echo '{"jsonrpc":"2.0","id":1,"method":"escapePointer","params":{"path":["toolState","raster-ops/dataset"]}}' | agui-state
  agui-state escape toolState raster-ops/dataset
  agui-state parse /toolState/raster-ops~1dataset
`,
  serve: `agui-state [serve] [flags]

Serves JSON-RPC 2.0 on stdin/stdout until stdin ends or SIGTERM/SIGINT, then
exits 0. stdout carries protocol frames only; logs are JSON lines on stderr.

Flags (a flag wins over its environment variable):
  --framing auto|ndjson|lsp   default auto: "{" or "[" first means newline-delimited JSON,
                              anything else Content-Length headers
  --log-level LEVEL           fatal, error, warn, info, debug, trace or silent
                              default info        env AGUI_STATE_LOG_LEVEL
${limitLines}
  Byte sizes also take a KiB, MiB or GiB suffix: --max-state-bytes 8MiB.
  Past --max-threads, opening a thread evicts the least recently used one.
  When the heap's live data nears --max-heap (at least 32MiB), the least
  recently used threads are evicted, and a warning says how many.

Methods (protocol/README.md §6 and §10 for activities; rpc.discover returns
the OpenRPC document):
${methodLines}

Examples:
  echo '{"jsonrpc":"2.0","id":1,"method":"stats"}' | agui-state
  AGUI_STATE_MAX_THREADS=500 agui-state --log-level debug
`,
  normalize: `agui-state normalize [--state FILE] [--strict] [OPS_FILE|-]

Applies protocol/README.md §5 (normalization) to a list of RFC 6902 ops
against a state (default {}) and prints {"delta", "skipped", "state"} as JSON.
Ops are read from OPS_FILE, or from stdin when it is "-" or missing.

  --state FILE   the state to apply the ops to (JSON)
  --strict       exit 1 when any op was skipped

Exit status: 0 on success, 1 on bad input (or a skip, with --strict).

Example:
  echo '[{"op":"add","path":"/todos/-","value":"milk"}]' | agui-state normalize
`,
  diff: `agui-state diff OLD.json NEW.json

Prints a minimal RFC 6902 delta that turns OLD into NEW, as a JSON array. Either
file may be "-" for stdin.

Example:
  agui-state diff before.json after.json
`,
  escape: `agui-state escape SEGMENT...

Prints the RFC 6901 pointer, as a JSON string, for raw segments ("~" becomes
"~0" first, then "/" becomes "~1").

Example:
  agui-state escape toolState raster-ops/dataset     # "/toolState/raster-ops~1dataset"
`,
  parse: `agui-state parse POINTER

Prints the raw segments of an RFC 6901 pointer as a JSON array; exit 1 if the
pointer is malformed.

Example:
  agui-state parse /toolState/raster-ops~1dataset    # ["toolState","raster-ops/dataset"]
`,
} satisfies Record<string, string>;

/** The help text of a command, or the main one. */
export function help(command?: string): string {
  return (HELP as Record<string, string>)[command ?? "main"] ?? HELP.main;
}
