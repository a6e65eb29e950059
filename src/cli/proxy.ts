import { LOG_LEVELS, type LogLevel } from "../log.js";
// A type only, erased from the bundle: the server itself is loaded in proxyCommand.
import type { ProxyOptions } from "../proxy/main.js";
import { parseFlags, UsageError } from "./options.js";
import { INSPECT_OPTIONS, inspectOptions } from "./inspect-flags.js";
import { REPAIR_OPTIONS, repairPolicy } from "./repair-flags.js";
import { EDGE_OPTIONS, maxRequestBody } from "./edge-flags.js";
import { RESUME_OPTIONS, resumeFlags } from "./resume-flags.js";

export const PROXY_HELP = `agui-state proxy --upstream URL [--listen HOST:PORT] [flags]

An HTTP reverse proxy in front of an existing AG-UI endpoint. Each request is
forwarded to URL with its method, path, query, headers (minus hop-by-hop ones)
and body. A text/event-stream answer is passed through "fix": every
STATE_DELTA and ACTIVITY_DELTA is normalized against a mirror of what the
client holds (starting from the request's RunAgentInput.state, or {}), so it
applies on the client; empty deltas and ACTIVITY_DELTAs for unknown activities
are dropped; every other event passes byte for byte. Any other answer
(JSON, application/vnd.ag-ui.event+proto, ...) passes untouched. Each
answer has its own mirror; the only state kept between requests is the run
log that resume answers rejoins from (below; --store none keeps none).

When ready it prints one line to stdout, "listening on http://HOST:PORT"
(with --inspect, after "inspector on http://HOST:PORT/");
logs are JSON lines on stderr. An unreachable or failing upstream gives 502
with a JSON body naming the cause. A client that disconnects mid-run leaves
its upstream request running for --detach-grace, for a rejoin (below); with
--store none, or an answer that is not an event stream, it aborts it. SIGTERM or SIGINT stops accepting, lets open streams finish
(up to --grace seconds), then exits 0.

Flags:
  --upstream URL       the AG-UI endpoint's origin and base path (http or https); required
  --listen HOST:PORT   default 127.0.0.1:8787; port 0 picks a free port; [::1]:8787 for IPv6
  --grace SECONDS      default 10: how long SIGTERM waits for open streams
  --log-level LEVEL    fatal, error, warn, info, debug, trace or silent
                       default info        env AGUI_STATE_LOG_LEVEL
  --own POINTER        repeatable: a member the server owns, such as /toolState.
                       Each STATE_SNAPSHOT then goes as a STATE_DELTA that
                       touches only the owned members (at a run's first
                       snapshot one add of each, whole; after that only what
                       moved; nothing when nothing moved), and the client's own
                       members stand. Pick it for a server that sends the whole
                       state on every write (LangGraph, CrewAI, Strands, Agent
                       Framework) while the client keeps keys of its own.
  --snapshots MODE     pass (default): snapshots go byte for byte, and replace
                       the client's state as AG-UI says. delta: each goes as
                       the minimal STATE_DELTA to the same state (members it
                       leaves out are removed): fewer bytes, same meaning. Pick
                       delta when the server owns the whole state; --own wins
                       over it.
  --inspect HOST:PORT  also serve the inspector there (default off): a page
                       showing each stream's events, the ops as sent beside
                       the ops as forwarded, each finding, and the state the
                       client holds after any event, live; its data as JSON at
                       /api/streams and /api/streams/ID. Its address goes to
                       stdout first, as "inspector on http://HOST:PORT/".
                       Loopback only, unless a token is set.
  --inspect-token TOKEN  at least 16 characters; every request to the inspector
                       must then carry "Authorization: Bearer TOKEN" (the page
                       may take it once as ?token=)
                       env AGUI_STATE_INSPECT_TOKEN
  --inspect-streams N  default 20: the inspector keeps the last N streams
  --inspect-events M   default 2000: and the last M events of each
  --inspect-bytes B    default 16M: and at most B bytes of text per stream
                       (K, M or G suffix); past a cap the oldest go first, and
                       the page says so. Nothing is written to disk.
  --join-keys          read a pointer that reaches an object and then a missing
                       member with its remaining segments joined by "/" as one
                       key, when the op then applies (a server that forgot
                       RFC 6901's escaping; never the default)

The info log has one line per event stream, with its findings counted by
kind (what the client would do with the stream as sent) and by outcome
(passed, mended, discarded, kept: what the proxy did); --log-level debug adds
one line per finding: every op the proxy sent rewritten or left out, and
every event, each with its outcome. A STATE_SNAPSHOT that is not an object is
left out (the client keeps the object it holds).

Resume (protocol/README.md §16). Every event of a repaired event stream gets
an SSE id (the upstream's own id lines are replaced), the answer says
"ag-ui-resumable: true", and the stream is kept as a run in a log. A client
that disconnects mid-run does not cancel the upstream request for
--detach-grace; it rejoins by POSTing the same request again with
Last-Event-ID (the agui-state-sidecar/resume module's fetch does), and gets
exactly the events after that id, then the live tail, from the log: the
upstream is not called again. POST <agent path>/connect with the thread's
RunAgentInput replays its latest run from RUN_STARTED, for a reloaded page.
Who may: a rejoin needs the id (unguessable) and, for a run started with a
credential, the same credential; a reload needs the thread's id and a run
started with a credential, presented again (anonymous runs: never, unless
--connect-anonymous). Anything else, an unknown or expired id, or a run that
ended broken with nothing after the id, gets 410 (a reload, 204): a refusal
and an unknown run look the same.
  --store STORE        memory (default): this process serves rejoins;
                       redis://HOST:PORT[/DB]: Redis Streams, so any replica
                       sharing it serves them, and a restarted proxy too;
                       none: no ids, no log, no rejoin (as before resume)
                       env AGUI_STATE_STORE
  --detach-grace SECONDS  default 30: how long a run goes on with nobody
                       reading it before its upstream request is cancelled;
                       0 cancels it as soon as its client leaves
  --retention SECONDS  default 300: how long a run's log is kept after it ends
  --run-log-bytes B    default 16M: one run's log; past it, not resumable
  --log-bytes B        default 256M: all runs' logs in memory; past it the
                       least recently used run is evicted (with Redis: Redis's
                       own maxmemory). Both caps count every byte kept for a
                       run: its events, the request state and messages a
                       reload replays, and the pages rejoins are reading
  --max-runs N         default 10000: runs kept; past it the least recently
                       used goes
  --credential SPEC    repeatable: what makes a request's credential,
                       header:NAME or cookie:NAME; default header:authorization.
                       Name the session cookie of an app that signs in by
                       cookie (cookie:session); a cookie not named (a load
                       balancer's AWSALB, a CDN's __cf_bm) never breaks a rejoin
                       env AGUI_STATE_CREDENTIALS (comma-separated)
  --connect-anonymous  let /connect reload a run started with no credential
                       (by anybody who knows its thread id)
                       env AGUI_STATE_CONNECT_ANONYMOUS=1
  --secret-file PATH   a secret of at least 32 bytes the credential key is
                       made from; give every replica sharing a Redis the same.
                       Without it each process draws its own key (with Redis,
                       said on stderr at start). Never kept in the store.
                       env AGUI_STATE_SECRET_FILE, or AGUI_STATE_SECRET (the text)

  --lifecycle MODE     pass (default) or repair: runs the client would fail are
                       mended as "fix --lifecycle" says (agui-state help fix);
                       an upstream that breaks off inside a run gets its run
                       ended with RUN_ERROR INCOMPLETE_STREAM and a clean end
                       env AGUI_STATE_LIFECYCLE
  --max-request-body B  default 32M: the request body kept for its
                       RunAgentInput.state (the body is forwarded as it
                       arrives either way); past it the repair starts from {}
                       env AGUI_STATE_MAX_REQUEST_BODY

A request for /agent/run on the proxy goes to URL's path joined with /agent/run.
Host becomes the upstream's; X-Forwarded-For, -Host and -Proto are added. A
gzip, deflate or br event stream is decoded, fixed, and sent unencoded. An
NDJSON answer (application/x-ndjson, application/ndjson, application/jsonl,
application/x-jsonl, application/jsonlines) is fixed too, without resume. Each
request opens its own upstream connection; one not made within 10 s is a 502.

Example:
  agui-state proxy --upstream http://127.0.0.1:8000 --listen 0.0.0.0:8787
`;

/** Splits HOST:PORT (HOST may be a bracketed IPv6 address). Throws UsageError when it is not one. */
export function parseListen(text: string, flag = "--listen"): { host: string; port: number } {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new UsageError(`${flag}: expected HOST:PORT with a port from 0 to 65535, got ${JSON.stringify(text)}`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Reads the upstream URL. Throws UsageError unless it is an absolute http(s) URL without credentials' surprises. */
export function parseUpstream(text: string | undefined): URL {
  if (text === undefined || text === "") throw new UsageError("proxy: --upstream URL is required; see agui-state proxy --help");
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--upstream: not a URL: ${JSON.stringify(text)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`--upstream: expected an http or https URL, got ${JSON.stringify(text)}`);
  if (url.search !== "" || url.hash !== "") throw new UsageError(`--upstream: expected no query or fragment, got ${JSON.stringify(text)}`);
  return url;
}

export function parseProxyArgs(argv: string[], env: NodeJS.ProcessEnv): ProxyOptions {
  const { values } = parseFlags("proxy", argv, { upstream: { type: "string" }, listen: { type: "string" }, grace: { type: "string" }, "log-level": { type: "string" }, ...REPAIR_OPTIONS, ...INSPECT_OPTIONS, ...RESUME_OPTIONS, ...EDGE_OPTIONS }, false);
  const upstream = parseUpstream(values["upstream"] as string | undefined);
  const { host, port } = parseListen(String(values["listen"] ?? "127.0.0.1:8787"));
  const graceText = String(values["grace"] ?? "10");
  const grace = /^\d+(\.\d+)?$/.test(graceText) ? Number(graceText) : NaN;
  if (!Number.isFinite(grace)) throw new UsageError(`--grace: expected a number of seconds, got ${JSON.stringify(graceText)}`);
  const level = String(values["log-level"] ?? env["AGUI_STATE_LOG_LEVEL"] ?? "info");
  if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new UsageError(`--log-level: expected one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(level)}`);
  const inspect = inspectOptions(values, env, (text) => parseListen(text, "--inspect"));
  const resume = resumeFlags(values, env);
  return { upstream, host, port, logLevel: level as LogLevel, graceMs: Math.round(grace * 1000), policy: repairPolicy(values, env), maxRequestBody: maxRequestBody(values, env), ...(inspect ? { inspect } : {}), ...(resume ? { resume } : {}) };
}

/**
 * `agui-state proxy`: parses the flags (a UsageError escapes to the caller,
 * which exits 2), then runs the proxy until SIGTERM/SIGINT and exits 0, or
 * exits 2 when it cannot listen (exit.ts). The server is loaded only here, so the
 * sidecar's start never pays for node:http.
 */
export function proxyCommand(argv: string[]): void {
  const options = parseProxyArgs(argv, process.env);
  void import("../proxy/main.js").then(({ runProxy }) => runProxy(options));
}
