import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import pkg from "../../package.json" with { type: "json" };
import { parseNdjson } from "../../scripts/harness/frames.js";
import { BINARY, SEA, childEnv, start } from "../../scripts/harness/process.js";

/**
 * Issue 22: one table of exit statuses, followed by every command (0 done,
 * nothing to report; 1 done, and the input had problems; 2 a usage error, or
 * input that cannot be read or is malformed), and one reader of JSON input,
 * whose every refusal is one stderr line naming the file (or stdin) and the
 * JSON Pointer of the problem. Each row runs the real binary and checks the
 * status, that stdout holds the command's output and nothing else, and stderr.
 */

const work = mkdtempSync(path.join(tmpdir(), "agui-exit-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const J = (v: unknown) => JSON.stringify(v);
/** {"a":{"a":...}} nested `levels` deep, and the pointer of its innermost object. */
const nest = (levels: number) => ({ text: '{"a":'.repeat(levels - 1) + "{}" + "}".repeat(levels - 1), innermost: "/a".repeat(levels - 1) });
const tooDeep = nest(257); // --max-depth is 256 by default
const started = J({ type: "RUN_STARTED", threadId: "t", runId: "r" });
const finished = J({ type: "RUN_FINISHED", threadId: "t", runId: "r" });
const delta = J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/n", value: 2 }] });
const streams = {
  "clean.ndjson": [started, delta, finished].join("\n") + "\n",
  // /todos does not exist: the client drops the delta; fix mends it.
  "dropped.ndjson": [started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk" }] }), finished].join("\n") + "\n",
  // An event before RUN_STARTED: a lifecycle break that fix cannot mend and sends as it came.
  "lifecycle.ndjson": [J({ type: "CUSTOM", name: "n", value: 1 }), started, finished].join("\n") + "\n",
  // Issue 32: a snapshot on every write. Without --state, the first one replaces whatever the client held.
  "snapshots.ndjson": [started, J({ type: "STATE_SNAPSHOT", snapshot: { n: 1 } }), J({ type: "STATE_SNAPSHOT", snapshot: { n: 2 } }), finished].join("\n") + "\n",
  // Issue 32: a snapshot that is not an object, then a delta written for an object.
  "not-object.ndjson": [started, J({ type: "STATE_SNAPSHOT", snapshot: "str" }), J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/n", value: 2 }] }), finished].join("\n") + "\n",
};
const files: Record<string, string> = {
  ...streams,
  "state.json": '{"n":1}',
  "empty.json": "{}",
  "new.json": '{"n":2}',
  "ops.json": '[{"op":"replace","path":"/n","value":2}]',
  "skip-ops.json": '[{"op":"remove","path":"/gone"}]',
  "array.json": "[1,2]",
  "bad.json": '{"a":{"b":[1,2,}',
  "bad-ops.json": '[{"op":"add","path":"/x","value":[1,}]',
  "unsafe.json": '{"ids":[1,12345678901234567890]}',
  // What a client holds of a server's 64-bit id, and writes back in RunAgentInput.state (issue 41).
  "unsafe-state.json": '{"n":1,"ids":[1,12345678901234567890]}',
  "unsafe-ops.json": '[{"op":"add","path":"/id","value":-12345678901234567890}]',
  "deep.json": tooDeep.text,
  "deep-ops.json": `[{"op":"add","path":"/x","value":${tooDeep.text}}]`,
  "huge.json": J({ s: "x".repeat(32 * 1024 * 1024) }),
  // Issue 32: a UTF-8 byte order mark, as editors on Windows write one, before every kind of input.
  "bom-state.json": '\ufeff{"n":1}',
  "bom-new.json": '\ufeff{"n":2}',
  "bom-ops.json": '\ufeff[{"op":"replace","path":"/n","value":2}]',
  "bom-clean.ndjson": "\ufeff" + streams["clean.ndjson"],
  // An invisible character where JSON breaks: the message must show it escaped.
  "hidden.json": '{"a":\u200b1}',
};
beforeAll(() => {
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(work, name), text);
});

type Stderr = "" | "usage" | { source: string; pointer: string; code: string };
interface Row {
  case: string;
  args: string[];
  stdin?: string;
  status: 0 | 1 | 2;
  /** Exactly what stdout holds. */
  stdout: string;
  stderr: Stderr;
}

const quote = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const refused = (source: string, pointer: string, code: string): Pick<Row, "status" | "stdout" | "stderr"> => ({ status: 2, stdout: "", stderr: { source, pointer, code } });
const usage: Pick<Row, "status" | "stdout" | "stderr"> = { status: 2, stdout: "", stderr: "usage" };

const TABLE: Record<string, Row[]> = {
  normalize: [
    { case: "success", args: ["--state", "state.json", "ops.json"], status: 0, stdout: J({ delta: [{ op: "replace", path: "/n", value: 2 }], skipped: [], state: { n: 2 } }) + "\n", stderr: "" },
    { case: "skips, with --strict", args: ["--strict", "skip-ops.json"], status: 1, stdout: J({ delta: [], skipped: [{ index: 0, op: { op: "remove", path: "/gone" }, code: "PATH_NOT_FOUND", message: "/gone does not exist" }], state: {} }) + "\n", stderr: "" },
    { case: "skips, without --strict", args: ["skip-ops.json"], status: 0, stdout: J({ delta: [], skipped: [{ index: 0, op: { op: "remove", path: "/gone" }, code: "PATH_NOT_FOUND", message: "/gone does not exist" }], state: {} }) + "\n", stderr: "" },
    { case: "usage error", args: ["--nope"], ...usage },
    { case: "usage error: both from stdin", args: ["--state", "-", "-"], ...usage },
    { case: "unreadable file", args: ["missing.json"], ...refused("missing.json", "", "UNREADABLE") },
    { case: "unreadable --state", args: ["--state", "missing.json", "ops.json"], ...refused("missing.json", "", "UNREADABLE") },
    { case: "malformed JSON", args: ["bad-ops.json"], ...refused("bad-ops.json", "/0/value/1", "PARSE_ERROR") },
    { case: "malformed JSON on stdin", args: [], stdin: "[{", ...refused("stdin", "/0", "PARSE_ERROR") },
    { case: "malformed --state", args: ["--state", "bad.json", "ops.json"], ...refused("bad.json", "/a/b/2", "PARSE_ERROR") },
    { case: "ops that are not an array", args: ["state.json"], ...refused("state.json", "", "INVALID_VALUE") },
    { case: "a state that is not an object", args: ["--state", "array.json", "ops.json"], ...refused("array.json", "", "ROOT_NOT_OBJECT") },
    { case: "an unsafe integer in a file", args: ["unsafe-ops.json"], ...refused("unsafe-ops.json", "/0/value", "UNSAFE_INTEGER") },
    { case: "an unsafe integer in --state", args: ["--state", "unsafe.json", "ops.json"], ...refused("unsafe.json", "/ids/1", "UNSAFE_INTEGER") },
    { case: "a number beyond a double", args: [], stdin: '[{"op":"add","path":"/x","value":1e400}]', ...refused("stdin", "/0/value", "NUMBER_OVERFLOW") },
    { case: "too deep", args: ["deep-ops.json"], ...refused("deep-ops.json", `/0/value${tooDeep.innermost}`, "LIMIT_EXCEEDED") },
    { case: "too deep a --state", args: ["--state", "deep.json", "ops.json"], ...refused("deep.json", tooDeep.innermost, "LIMIT_EXCEEDED") },
    { case: "too large a --state", args: ["--state", "huge.json", "ops.json"], ...refused("huge.json", "", "LIMIT_EXCEEDED") },
    { case: "a BOM before the ops and the --state", args: ["--state", "bom-state.json", "bom-ops.json"], status: 0, stdout: J({ delta: [{ op: "replace", path: "/n", value: 2 }], skipped: [], state: { n: 2 } }) + "\n", stderr: "" },
    { case: "a BOM before ops on stdin", args: [], stdin: '\ufeff[{"op":"add","path":"/x","value":1}]', status: 0, stdout: J({ delta: [{ op: "add", path: "/x", value: 1 }], skipped: [], state: { x: 1 } }) + "\n", stderr: "" },
    { case: "an invisible character where JSON breaks", args: ["hidden.json"], ...refused("hidden.json", "/a", "PARSE_ERROR") },
    { case: "usage error: an unknown flag", args: ["--bogus", "ops.json"], ...usage },
    { case: "-- ends the flags: a file named --strict", args: ["--", "--strict"], ...refused("--strict", "", "UNREADABLE") },
  ],
  diff: [
    { case: "success", args: ["state.json", "new.json"], status: 0, stdout: '[{"op":"replace","path":"/n","value":2}]\n', stderr: "" },
    { case: "success, one side on stdin", args: ["state.json", "-"], stdin: '{"n":1}', status: 0, stdout: "[]\n", stderr: "" },
    { case: "usage error", args: ["state.json"], ...usage },
    { case: "unreadable file", args: ["state.json", "missing.json"], ...refused("missing.json", "", "UNREADABLE") },
    { case: "malformed JSON", args: ["bad.json", "state.json"], ...refused("bad.json", "/a/b/2", "PARSE_ERROR") },
    // Two arrays once gave `replace ""`, an op that names the root (protocol/README.md §11, §5 rule 7).
    { case: "states that are not objects", args: ["array.json", "array.json"], ...refused("array.json", "", "ROOT_NOT_OBJECT") },
    { case: "a scalar on stdin", args: ["state.json", "-"], stdin: "7", ...refused("stdin", "", "ROOT_NOT_OBJECT") },
    { case: "an unsafe integer in a file", args: ["state.json", "unsafe.json"], ...refused("unsafe.json", "/ids/1", "UNSAFE_INTEGER") },
    { case: "too deep", args: ["deep.json", "state.json"], ...refused("deep.json", tooDeep.innermost, "LIMIT_EXCEEDED") },
    { case: "a BOM before both states", args: ["bom-state.json", "bom-new.json"], status: 0, stdout: '[{"op":"replace","path":"/n","value":2}]\n', stderr: "" },
    { case: "usage error: an unknown flag", args: ["state.json", "new.json", "--bogus"], ...usage },
  ],
  escape: [
    { case: "success", args: ["a/b", "~"], status: 0, stdout: '"/a~1b/~0"\n', stderr: "" },
    { case: "success: the root, asked for with --", args: ["--"], status: 0, stdout: '""\n', stderr: "" },
    { case: "usage error: no segment", args: [], ...usage },
    // Issue 32: an unknown flag was taken as a segment and printed, exit 0.
    { case: "usage error: an unknown flag", args: ["--bogus"], ...usage },
    { case: "usage error: an unknown short flag among segments", args: ["a", "-x"], ...usage },
    { case: "success: after --, a segment that starts with -", args: ["--", "--bogus", "-"], status: 0, stdout: '"/--bogus/-"\n', stderr: "" },
    { case: "success: - alone is a segment", args: ["todos", "-"], status: 0, stdout: '"/todos/-"\n', stderr: "" },
  ],
  parse: [
    { case: "success", args: ["/a~1b/~01"], status: 0, stdout: '["a/b","~1"]\n', stderr: "" },
    { case: "usage error", args: [], ...usage },
    { case: "malformed pointer", args: ["no-slash"], status: 2, stdout: "", stderr: { source: '"no-slash"', pointer: "", code: "INVALID_POINTER" } },
    { case: "usage error: an unknown flag", args: ["--bogus"], ...usage },
    { case: "success: the pointer after --", args: ["--", "/a"], status: 0, stdout: '["a"]\n', stderr: "" },
    { case: "a malformed pointer with a BOM in it, shown escaped", args: ["\ufeff/a"], status: 2, stdout: "", stderr: { source: '"\\ufeff/a"', pointer: "", code: "INVALID_POINTER" } },
  ],
  check: [
    { case: "success", args: ["--state", "state.json", "clean.ndjson"], status: 0, stdout: "3 events, 1 delta: the client applies every one\n", stderr: "" },
    { case: "findings", args: ["dropped.ndjson"], status: 1, stdout: expect.stringMatching(/^line 2, event 2 \(STATE_DELTA\): dropped: [^\n]*\n3 events, 1 delta: 1 dropped[^\n]*\n$/) as string, stderr: "" },
    { case: "findings: a snapshot without --state may replace the client's own members", args: ["snapshots.ndjson"], status: 1, stdout: expect.stringMatching(/^line 2, event 2 \(STATE_SNAPSHOT\): wiped: SNAPSHOT_REPLACES_UNKNOWN: [^\n]*Hint: [^\n]*`fix --own POINTER`[^\n]*\n4 events, 0 deltas: 0 dropped, 0 ignored, 0 fatal, 1 wiped\n$/) as string, stderr: "" },
    { case: "success: the same snapshots, with what the client holds given", args: ["--state", "empty.json", "snapshots.ndjson"], status: 0, stdout: "4 events, 0 deltas: the client applies every one\n", stderr: "" },
    // Issue 41: a snapshot that updates a member the client held is a wipe, unless --own says the member is the server's.
    { case: "findings: a snapshot that updates a member the client held", args: ["--state", "state.json", "snapshots.ndjson"], status: 1, stdout: expect.stringMatching(/^line 3, event 3 \(STATE_SNAPSHOT\): wiped: SNAPSHOT_WIPE: [^\n]*\/n[^\n]*\n4 events, 0 deltas: 0 dropped, 0 ignored, 0 fatal, 1 wiped\n$/) as string, stderr: "" },
    { case: "success: the same snapshots, the member named --own", args: ["--state", "state.json", "--own", "/n", "snapshots.ndjson"], status: 0, stdout: "4 events, 0 deltas: the client applies every one\n", stderr: "" },
    { case: "usage error: --own that is not a pointer", args: ["--own", "n", "snapshots.ndjson"], ...usage },
    { case: "findings: a snapshot that is not an object", args: ["--state", "empty.json", "not-object.ndjson"], status: 1, stdout: expect.stringMatching(/^line 2, event 2 \(STATE_SNAPSHOT\): wiped: ROOT_NOT_OBJECT: the snapshot is a string, "str", not an object[^\n]*\n4 events, 1 delta: 0 dropped, 0 ignored, 0 fatal, 1 wiped\n$/) as string, stderr: "" },
    { case: "usage error", args: ["--nope"], ...usage },
    { case: "unreadable stream", args: ["missing.ndjson"], ...refused("missing.ndjson", "", "UNREADABLE") },
    { case: "unreadable --state", args: ["--state", "missing.json", "clean.ndjson"], ...refused("missing.json", "", "UNREADABLE") },
    { case: "malformed --state", args: ["--state", "bad.json", "clean.ndjson"], ...refused("bad.json", "/a/b/2", "PARSE_ERROR") },
    { case: "a state that is not an object", args: ["--state", "array.json", "clean.ndjson"], ...refused("array.json", "", "ROOT_NOT_OBJECT") },
    // protocol/README.md §3, baselines: the client's state is read as its JSON.parse reads it, an integer past 2^53 a double.
    { case: "success: an unsafe integer in --state is the double the client holds", args: ["--state", "unsafe-state.json", "clean.ndjson"], status: 0, stdout: "3 events, 1 delta: the client applies every one\n", stderr: "" },
    { case: "too deep a --state", args: ["--state", "deep.json", "clean.ndjson"], ...refused("deep.json", tooDeep.innermost, "LIMIT_EXCEEDED") },
    { case: "a --state on stdin", args: ["--state", "-", "clean.ndjson"], stdin: "[]", ...refused("stdin", "", "ROOT_NOT_OBJECT") },
    { case: "a BOM before the --state and the stream", args: ["--state", "bom-state.json", "bom-clean.ndjson"], status: 0, stdout: "3 events, 1 delta: the client applies every one\n", stderr: "" },
    { case: "a BOM before a --state on stdin", args: ["--state", "-", "clean.ndjson"], stdin: '\ufeff{"n":1}', status: 0, stdout: "3 events, 1 delta: the client applies every one\n", stderr: "" },
    { case: "usage error: an unknown flag after the file", args: ["clean.ndjson", "--bogus"], ...usage },
  ],
  fix: [
    { case: "success", args: ["--state", "state.json", "clean.ndjson"], status: 0, stdout: streams["clean.ndjson"], stderr: "" },
    { case: "success: a delta mended", args: ["dropped.ndjson"], status: 0, stdout: [started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos", value: [] }, { op: "add", path: "/todos/-", value: "milk" }] }), finished].join("\n") + "\n", stderr: "" },
    { case: "an event the client refuses sent as it came", args: ["lifecycle.ndjson"], status: 1, stdout: streams["lifecycle.ndjson"], stderr: "" },
    { case: "success: snapshots that may replace the client's own members go as they came (reported with --report)", args: ["snapshots.ndjson"], status: 0, stdout: streams["snapshots.ndjson"], stderr: "" },
    { case: "success: a snapshot that is not an object is left out", args: ["--state", "empty.json", "not-object.ndjson"], status: 0, stdout: [started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/n", value: 2 }] }), finished].join("\n") + "\n", stderr: "" },
    { case: "usage error", args: ["--json"], ...usage },
    { case: "unreadable stream", args: ["missing.ndjson"], ...refused("missing.ndjson", "", "UNREADABLE") },
    { case: "malformed --state", args: ["--state", "bad.json", "clean.ndjson"], ...refused("bad.json", "/a/b/2", "PARSE_ERROR") },
    { case: "a state that is not an object", args: ["--state", "array.json", "clean.ndjson"], ...refused("array.json", "", "ROOT_NOT_OBJECT") },
    { case: "success: an unsafe integer in --state is the double the client holds", args: ["--state", "unsafe-state.json", "clean.ndjson"], status: 0, stdout: streams["clean.ndjson"], stderr: "" },
    { case: "too deep a --state", args: ["--state", "deep.json", "clean.ndjson"], ...refused("deep.json", tooDeep.innermost, "LIMIT_EXCEEDED") },
    { case: "a BOM before the --state", args: ["--state", "bom-state.json", "clean.ndjson"], status: 0, stdout: streams["clean.ndjson"], stderr: "" },
    { case: "usage error: an unknown flag", args: ["--bogus", "clean.ndjson"], ...usage },
  ],
  serve: [
    { case: "success: stdin ends", args: [], stdin: J({ jsonrpc: "2.0", id: 1, method: "escapePointer", params: { path: ["a/b"] } }) + "\n", status: 0, stdout: J({ jsonrpc: "2.0", id: 1, result: { pointer: "/a~1b" } }) + "\n", stderr: "" },
    { case: "usage error: a bad flag value", args: ["--max-ops", "0"], ...usage },
    { case: "usage error: a positional", args: ["serve", "extra"], ...usage },
    { case: "usage error: an unknown command", args: ["frobnicate"], ...usage },
    { case: "usage error: an unknown flag", args: ["serve", "--bogus"], ...usage },
  ],
  help: [
    { case: "success", args: ["diff"], status: 0, stdout: expect.stringMatching(/^agui-state diff OLD\.json NEW\.json\n/) as string, stderr: "" },
    { case: "usage error: no such command", args: ["frobnicate"], ...usage },
    { case: "usage error: an unknown flag", args: ["--bogus"], ...usage },
  ],
  "--version": [
    { case: "success", args: [], status: 0, stdout: `${pkg.version}\n`, stderr: "" },
    { case: "usage error: an unknown flag", args: ["--bogus"], ...usage },
  ],
};

function agui(args: string[], stdin = "") {
  const r = spawnSync(BINARY, args, { input: stdin, cwd: work, env: childEnv(), timeout: 20_000 });
  return { status: r.status, stdout: r.stdout.toString("utf8"), stderr: r.stderr.toString("utf8") };
}

describe("the exit-code table, run against the binary", () => {
  for (const [command, rows] of Object.entries(TABLE)) {
    describe(command, () => {
      for (const row of rows) {
        it(`${row.case}: exit ${row.status}`, () => {
          const argv = command === "serve" ? row.args : [command, ...row.args];
          const r = agui(argv, row.stdin);
          expect(r.status, r.stderr).toBe(row.status);
          expect(r.stdout).toEqual(row.stdout);
          if (row.stderr === "") expect(r.stderr).toBe("");
          // One line: the problem, then the command's usage line (its help's synopsis).
          else if (row.stderr === "usage") expect(r.stderr).toMatch(new RegExp(`^agui-state: [^\\n]+; usage: agui-state ${command === "serve" ? "" : command === "help" || command === "--version" ? "COMMAND" : quote(command)}[^\\n]*\\n$`));
          else {
            // One line: the command, the file (or stdin), the pointer, a stable code, then words for people.
            const { source, pointer, code } = row.stderr;
            const where = command === "parse" ? quote(source) : `${quote(source)} at ${quote(J(pointer))}`;
            expect(r.stderr).toMatch(new RegExp(`^agui-state ${command}: ${where}: ${code}: [^\\n]+\\n$`));
          }
        });
      }
    });
  }

  it("serve's stdout holds frames only, a reply for each request", () => {
    const r = agui([], [1, 2].map((id) => J({ jsonrpc: "2.0", id, method: "stats" })).join("\n") + "\n");
    expect(r.status).toBe(0);
    expect(parseNdjson(Buffer.from(r.stdout)).map((f) => (f as { id: number }).id)).toEqual([1, 2]);
  });

  describe("proxy", () => {
    it("success: stops on SIGTERM, exit 0, with only its listening line on stdout", async () => {
      const proxy = start(SEA, ["proxy", "--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--log-level", "silent"]);
      await proxy.until(() => proxy.stdout.includes("\n"), "the listening line");
      proxy.kill("SIGTERM");
      expect((await proxy.waitForExit()).code).toBe(0);
      expect(proxy.stdout.toString()).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\n$/);
    });

    it("usage error: no --upstream, exit 2", () => {
      const r = agui(["proxy", "--listen", "127.0.0.1:0"]);
      expect([r.status, r.stdout]).toEqual([2, ""]);
      expect(r.stderr).toMatch(/^agui-state: proxy: --upstream URL is required[^\n]*; usage: agui-state proxy --upstream URL[^\n]*\n$/);
    });

    it("an address it cannot listen on, for the proxy or for its inspector: exit 2", async () => {
      const taken: Server = createServer();
      await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
      try {
        const port = (taken.address() as { port: number }).port;
        const r = agui(["proxy", "--upstream", "http://127.0.0.1:9", "--listen", `127.0.0.1:${port}`, "--log-level", "silent"]);
        expect([r.status, r.stdout]).toEqual([2, ""]);
        expect(r.stderr).toMatch(new RegExp(`^agui-state: cannot listen on 127\\.0\\.0\\.1:${port}: [^\\n]*EADDRINUSE[^\\n]*\\n$`));
        const i = agui(["proxy", "--upstream", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--inspect", `127.0.0.1:${port}`, "--log-level", "silent"]);
        expect([i.status, i.stdout]).toEqual([2, ""]);
        expect(i.stderr).toMatch(new RegExp(`^agui-state: cannot listen on 127\\.0\\.0\\.1:${port} \\(--inspect\\): [^\\n]*EADDRINUSE[^\\n]*\\n$`));
      } finally {
        taken.close();
      }
    });
  });

  it("proxy: an unknown flag, exit 2 with the usage line", () => {
    const r = agui(["proxy", "--upstream", "http://127.0.0.1:9", "--bogus"]);
    expect([r.status, r.stdout]).toEqual([2, ""]);
    expect(r.stderr).toBe('agui-state: proxy: unknown flag "--bogus"; usage: agui-state proxy --upstream URL [--listen HOST:PORT] [flags]\n');
  });

  it("--help among a command's flags prints its help, exit 0", () => {
    for (const [args, first] of [
      [["escape", "a", "--help"], "agui-state escape [--] SEGMENT..."],
      [["check", "run.sse", "-h"], "agui-state check "],
      [["serve", "--max-ops", "3", "--help"], "agui-state [serve] [flags]"],
    ] as const) {
      const r = agui([...args]);
      expect([r.status, r.stderr], args.join(" ")).toEqual([0, ""]);
      expect(r.stdout.startsWith(first), args.join(" ")).toBe(true);
    }
  });

  it("shows an invisible character in a parse error escaped, and names a BOM it cannot skip", () => {
    expect(agui(["normalize", "hidden.json"]).stderr).toContain('unexpected "\\u200b" where a value belongs');
    const ops = agui(["normalize"], '[\ufeff{"op":"add","path":"/x","value":1}]');
    expect(ops.status).toBe(2);
    expect(ops.stderr).toContain('unexpected "\\ufeff" (a byte order mark, U+FEFF) where a value belongs');
  });

  it("is printed by --help", () => {
    const text = agui(["--help"]).stdout;
    for (const line of ["  0  done, nothing to report", "  1  done, and the input had problems", "  2  nothing done: a usage error"]) expect(text).toContain(line);
  });
});
