import { EXIT_TABLE } from "./exit.js";
import { LIMIT_FLAGS } from "./options.js";
import { PROXY_HELP } from "./proxy.js";
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
  agui-state escape [--] SEGMENT...
  agui-state parse POINTER
  agui-state check [FILE|-] [--state FILE] [--own POINTER]... [--json] [--html FILE] [--sarif FILE] [--junit FILE]
                                      report the events of an AG-UI stream the client would not apply
  agui-state fix [FILE|-] [--state FILE] [--report] [--own POINTER]... [--snapshots pass|delta] [--join-keys] [--lifecycle repair|pass]
                                      write the stream back with every delta made to apply
  agui-state proxy --upstream URL     an HTTP proxy that fixes an AG-UI endpoint's event streams
  agui-state help [COMMAND]           this text, or a command's
  agui-state --version

Run "agui-state help serve" for the flags, limits and environment variables.

Flags, the same for every command: -h or --help prints the command's help; a
flag the command does not know is a usage error (exit 2, one line on stderr
that ends with the command's usage), never taken as an argument; "--" ends the
flags, so an argument after it may start with "-" (agui-state escape -- -x).

${EXIT_TABLE}
Examples:
  echo '{"jsonrpc":"2.0","id":1,"method":"escapePointer","params":{"path":["toolState","raster-ops/dataset"]}}' | agui-state
  agui-state escape toolState raster-ops/dataset
  agui-state parse /toolState/raster-ops~1dataset
  curl -N -d @run.json http://localhost:8000/agent | agui-state check
`,
  serve: `agui-state [serve] [flags]

Serves JSON-RPC 2.0 on stdin/stdout until stdin ends or SIGTERM/SIGINT, then
exits 0. stdout carries protocol frames only; logs are JSON lines on stderr.
With --listen, it serves connections instead: one sidecar for every worker
of a host (protocol/README.md §2, "One sidecar per host").

Flags (a flag wins over its environment variable):
  --listen ADDRESS            unix:PATH (created owner-only, 0600) or tcp:127.0.0.1:PORT
                              (loopback only; any user of the host may connect, so
                              only where there is no Unix socket). Connections share
                              threads, streams and runs; one that closes releases the
                              streams it opened. stdin is not read; stdout gets one
                              line, "listening on ADDRESS". Exits 2 when it cannot
                              listen, 3 when a live sidecar serves that socket already
  --exit-idle MS              with --listen: exit 0 once no connection has been open
                              for MS milliseconds (what a worker that starts the
                              host's sidecar asks for)
  --framing auto|ndjson|lsp   default auto: a message that starts with "{" or "[" is a
                              JSON line, anything else Content-Length headers; a line
                              that is neither gets -32700 and reading goes on
  --log-level LEVEL           fatal, error, warn, info, debug, trace or silent
                              default info        env AGUI_STATE_LOG_LEVEL
${limitLines}
  Byte sizes also take a KiB, MiB or GiB suffix: --max-state-bytes 8MiB.
  Past --max-threads, opening a thread evicts the least recently used one.
  When the heap's live data nears --max-heap (at least 32MiB), the least
  recently used threads are evicted, and a warning says how many.
  Past --max-streams, opening a stream (openStream, protocol/README.md §14)
  closes the least recently used one; a stream idle for --stream-idle-ms
  milliseconds is closed.
  --max-request-body B (32M)  the request body a middleware keeps for its
                              RunAgentInput (classifyRequest's bodyBytes, at
                              most half of --max-message-bytes); past it the
                              repair starts from {}
                              env AGUI_STATE_MAX_REQUEST_BODY

Resume (protocol/README.md §16): a stream opened with openStream's resume
gets an SSE id on every event and is kept as a run in a log, which a
middleware's dropped or reloaded client rejoins (rejoinStream, readRejoin).
The flags are proxy's (agui-state proxy --help):
  --store memory|none|redis://HOST:PORT[/DB]   default memory; env AGUI_STATE_STORE
  --detach-grace SECONDS (30)   --retention SECONDS (300)
  --run-log-bytes B (16M)       --log-bytes B (256M)       --max-runs N (10000)
  --credential header:NAME|cookie:NAME (header:authorization)   --connect-anonymous
  --secret-file PATH            env AGUI_STATE_CREDENTIALS, AGUI_STATE_SECRET(_FILE)

Methods (protocol/README.md §6, §10 for activities, §14 for streams; rpc.discover returns
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

The ops must be a JSON array and the state a JSON object, read as the
sidecar reads params: an integer beyond ±(2^53 − 1), a number beyond a
double's range, nesting past
--max-depth or a state past --max-state-bytes (their defaults) is refused.

Exit status: 0 on success; 1 when an op was skipped, with --strict; 2 for a
usage error or input that cannot be read or is malformed.

Example:
  echo '[{"op":"add","path":"/todos/-","value":"milk"}]' | agui-state normalize
`,
  diff: `agui-state diff OLD.json NEW.json

Prints a minimal RFC 6902 delta that turns OLD into NEW, as a JSON array. Either
file may be "-" for stdin. Both are states: JSON objects (protocol/README.md
§11), read as normalize reads --state.

Exit status: 0; 2 for a usage error or input that cannot be read or is malformed.

Example:
  agui-state diff before.json after.json
`,
  escape: `agui-state escape [--] SEGMENT...

Prints the RFC 6901 pointer, as a JSON string, for raw segments ("~" becomes
"~0" first, then "/" becomes "~1"). Every argument after "--" is a segment,
even one that starts with "-"; before "--", such an argument is a flag, and
escape has none (an unknown flag exits 2). "-" alone is a segment. At least
one segment is needed, so that an empty variable does not silently give the
root; "escape --" prints "", the root, on purpose.

Example:
  agui-state escape toolState raster-ops/dataset     # "/toolState/raster-ops~1dataset"
  agui-state escape -- -x todos -                    # "/-x/todos/-"
`,
  parse: `agui-state parse POINTER

Prints the raw segments of an RFC 6901 pointer as a JSON array; exit 2, with
nothing on stdout, if the pointer is malformed.

Example:
  agui-state parse /toolState/raster-ops~1dataset    # ["toolState","raster-ops/dataset"]
`,
  check: `agui-state check [FILE|-] [--state FILE] [--own POINTER]... [--json]
                 [--html FILE] [--sarif FILE] [--junit FILE]

Replays an AG-UI event stream exactly as @ag-ui/client 1.0.0 would, and
reports every event the client would not apply:
  dropped   a STATE_DELTA or ACTIVITY_DELTA whose patch fails: the client warns
            and keeps the old value (also an op the client strips, an unknown
            event type)
  ignored   an ACTIVITY_DELTA for an activity the client does not have: it is
            skipped without a word
  fatal     an event the client's schema refuses (a malformed pointer, a
            missing value), or a break of the run lifecycle (the first event
            must be RUN_STARTED, ...): the client's whole run fails there, and
            nothing after it is applied
  wiped     a STATE_SNAPSHOT that removes or replaces a member the client held
            before the stream (--state) and no event of the stream set: the
            client applies it, and loses that member (SNAPSHOT_WIPE; the
            server should send a STATE_DELTA on its own namespace, or run
            behind fix --own). Without --state, what the client holds is not
            known, and the first snapshot it applies may replace members of
            its own (SNAPSHOT_REPLACES_UNKNOWN). A snapshot that is not an
            object takes everything the client held (ROOT_NOT_OBJECT)
A delta the client drops is dropped at one op, the first that fails as it
applies them in order ("where the client stops"; "stops": true in --json);
each other op that fails too, once the ones before it that apply have, is
listed as well: take them all out, and the rest applies.
The stream is Server-Sent Events (data: lines, an event ended by a blank line)
or NDJSON (one event per line), told apart by its first non-blank line; it is
read from FILE, or from stdin when FILE is "-" or missing. SSE is read as the
client reads it: events end only at two LFs, so a stream whose lines end with
CRLF runs together into one event (SSE_LINE_ENDS; fix writes LF).

  --state FILE   the state the client holds before the stream (a JSON object;
                 default {}); kept across the runs in the stream. Read as the
                 client reads JSON: an integer beyond 2^53 is the double it holds
  --own POINTER  a member the server owns (repeatable), as fix and proxy take
                 it: a snapshot may replace it without a finding, and is
                 "wiped" only where it drops or changes a member outside the
                 owned ones. Use it for a server that keeps its whole state in
                 snapshots (LangGraph, CrewAI, ...), with --state the client's
                 state as its request sent it, to see whether the client's own
                 keys survive; without it, every member a snapshot updates
                 that the client held is "wiped"
  --json         NDJSON: one object per finding, then {"summary": {...}}
                 (protocol/README.md §13)
  --html FILE    also write a report to FILE: one self-contained HTML page
                 (the inspector's, as proxy --inspect serves it) with each
                 event, its findings and the state the client holds after it;
                 a CI artifact to look at instead of reading --json
  --sarif FILE   also write the findings as a SARIF 2.1.0 log (GitHub code
                 scanning): one result per finding, its rule the finding's
                 code (every code's rule, with its help, is in the log), at
                 the input file and the event's line; level error for
                 fatal and dropped, warning for wiped and ignored
  --junit FILE   also write JUnit XML: one failed test case per event with
                 findings; one passing test case when there are none
  These files are written even when nothing is found, and change neither
  stdout nor the exit status.

Each finding names the event's number and its line in the input, the op and
its pointer, a code (the skip codes of protocol/README.md §4, or §13's), and a
hint where one applies. A summary line ends the output.

Exit status: 0 when the client applies everything, 1 when anything would be
dropped, ignored, fatal or wiped (without --state, a snapshot that may replace
the client's own members is one), 2 for a usage error, or input that cannot be
read or is malformed (a --state that is not JSON, or not an object, ...).

Examples:
  agui-state check run.sse
  curl -N -d @run.json http://localhost:8000/agent | agui-state check --json
  agui-state check run.sse --html run.html
  agui-state check run.sse --sarif check.sarif --junit check.xml
`,
  fix: `agui-state fix [FILE|-] [--state FILE] [--report] [--own POINTER]...
                [--snapshots pass|delta] [--join-keys] [--lifecycle repair|pass]

Writes the stream to stdout, in the same framing, with every STATE_DELTA and
ACTIVITY_DELTA made to apply on @ag-ui/client. Each delta is normalized
(protocol/README.md §5) against a mirror of what the client holds:
  - ops that do not fit are dropped (an unescaped key whose meaning is not
    certain is dropped and reported, never rewritten);
  - a missing array before an append is inserted;
  - a replace of a missing member becomes an add;
  - test ops go.
A delta left empty is left out, as is an ACTIVITY_DELTA for an activity the
client does not have, and a STATE_SNAPSHOT that is not an object (the client
keeps the object it holds). Every other event passes through byte for byte, SSE
comments and id: lines included, except that SSE lines ended with CRLF or CR
are written with LF, the only line end @ag-ui/client splits events at. Each event is written as soon as its input is
complete, so it works on a live stream (curl -N ... | agui-state fix), and
memory stays flat however long the stream.

  --state FILE   the state the client holds before the stream (a JSON object):
                 the baseline; without it, {} stands in, and the first snapshot
                 sent whole is reported as one that may replace the client's
                 own members
  --report       write the findings to stderr, as "check" words them: every
                 op fix sent rewritten or left out, and every event, each with
                 its outcome: passed (sent as it came), mended (sent
                 rewritten), discarded (left out) or kept (the client's value
                 left standing, --own)
  --own POINTER  repeatable: a member the server owns (/toolState); the client
                 owns the rest. Each STATE_SNAPSHOT goes as a STATE_DELTA that
                 touches only the owned members: one op per key that moved,
                 nothing when nothing moved; without --state (what the client
                 holds not known), a run's first snapshot is one add of each,
                 whole. What it says elsewhere is not
                 applied. A STATE_DELTA is an explicit write: it applies
                 wherever it points, --own or not.
  --snapshots M  pass (default): snapshots go byte for byte. delta: each goes
                 as the minimal STATE_DELTA to the same state (members it
                 leaves out are removed): fewer bytes, same meaning
  --join-keys    read a pointer that reaches an object and then a missing
                 member with the rest of its segments joined by "/" as one
                 key, when the op then applies (a server that forgot RFC 6901
                 escaping); reported as mended; never the default
  --lifecycle M  pass (default): events go as they come. repair: runs the
                 client would fail are mended, each mend reported: a
                 missing RUN_STARTED, TEXT_MESSAGE_START or TOOL_CALL_START is
                 sent first; what is open is closed before the run ends; a
                 RUN_FINISHED is held back until the stream ends, so what
                 comes after it stays in the run; duplicates and events after
                 RUN_ERROR are left out; a stream that stops inside its run is
                 ended with RUN_ERROR INCOMPLETE_STREAM
                 env AGUI_STATE_LIFECYCLE

Exit status: 0; 1 when an event the client refuses could not be mended and
went out as it came (a lifecycle break, an unknown event type, an event other
than a delta that the schema refuses); 2 for a usage error, or input that
cannot be read or is malformed.

Examples:
  agui-state fix --report run.sse > fixed.sse
  agui-state fix --state client.json --own /toolState run.sse
  curl -N -d @run.json http://localhost:8000/agent | agui-state fix
`,
  proxy: PROXY_HELP,
} satisfies Record<string, string>;

/** Whether `agui-state help TOPIC` has a page for it. */
export const isHelpTopic = (topic: string): boolean => Object.prototype.hasOwnProperty.call(HELP, topic);

/**
 * The usage line a usage error ends with: the synopsis that opens the
 * command's help, on one line; for no command, how to find them.
 */
export function usageLine(command?: string): string {
  if (command === undefined || !isHelpTopic(command) || command === "main") return "agui-state COMMAND [flags] (agui-state --help lists them)";
  return (help(command).split("\n\n")[0] as string).replace(/\s+/g, " ").trim();
}

/** The help text of a command, or the main one. */
export function help(command?: string): string {
  return (HELP as Record<string, string>)[command ?? "main"] ?? HELP.main;
}
