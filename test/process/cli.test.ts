import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import pkg from "../../package.json" with { type: "json" };
import { parseNdjson } from "../../scripts/harness/frames.js";
import { BINARY, childEnv } from "../../scripts/harness/process.js";
import { METHOD_PARAMS } from "../../src/protocol/types.js";

/** Runs the binary to completion with the given stdin; never hangs. */
function agui(args: string[], input = "", env: Record<string, string> = {}, cwd?: string) {
  const r = spawnSync(BINARY, args, { input, env: childEnv(env), cwd, timeout: 15_000 });
  return { status: r.status, stdout: r.stdout.toString("utf8"), stderr: r.stderr.toString("utf8") };
}

const stats = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "stats" }) + "\n";
const limitsOf = (stdout: string) => (parseNdjson(Buffer.from(stdout))[0] as { result: { limits: Record<string, number> } }).result.limits;

const work = mkdtempSync(path.join(tmpdir(), "agui-cli-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("agui-state serve", () => {
  it("serves JSON-RPC with no subcommand and with `serve`", () => {
    for (const args of [[], ["serve"]]) {
      const r = agui(args, stats);
      expect(r.status).toBe(0);
      expect(limitsOf(r.stdout).maxThreads).toBe(10_000);
    }
  });

  it("takes each limit from its flag or its environment variable, the flag winning", () => {
    const env = { AGUI_STATE_MAX_OPS: "7", AGUI_STATE_MAX_THREADS: "9", AGUI_STATE_MAX_STATE_BYTES: "1MiB", AGUI_STATE_MAX_HEAP: "64MiB", AGUI_STATE_MAX_STREAMS: "5", AGUI_STATE_STREAM_IDLE_MS: "9000" };
    const r = agui(["--max-ops", "3", "--max-depth=12", "--max-message-bytes", "2KiB", "--stream-idle-ms", "1500"], stats, env);
    expect(limitsOf(r.stdout)).toEqual({ maxMessageBytes: 2048, maxOps: 3, maxDepth: 12, maxStateBytes: 1 << 20, maxThreads: 9, maxHeapBytes: 64 << 20, maxStreams: 5, streamIdleMs: 1500 });
    expect(limitsOf(agui(["--max-heap", "2GiB"], stats, env).stdout).maxHeapBytes).toBe(2 * 1024 ** 3);
  });

  it("refuses a bad flag value, an unknown flag or command at start: one line on stderr, exit 2, nothing on stdout", () => {
    // "demo" is no command of the binary: the demo is a client (npm run demo, scripts/demo.ts).
    for (const args of [["--max-ops", "0"], ["--max-threads", "ten"], ["--max-heap", "16MiB"], ["--framing", "xml"], ["--log-level", "loud"], ["--nope"], ["frobnicate"], ["demo"]]) {
      const r = agui(args, stats);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(r.stderr).toMatch(/^agui-state: /);
    }
    const env = agui([], stats, { AGUI_STATE_MAX_DEPTH: "-1" });
    expect([env.status, env.stderr]).toEqual([2, expect.stringContaining("AGUI_STATE_MAX_DEPTH")]);
  });

  it("prints a hint to stderr, never to stdout, when stdin is a terminal", () => {
    // A pseudo-terminal on stdin, from Python's pty module; stdout and stderr stay pipes.
    const script = `
import os, pty, subprocess, sys, json
m, s = pty.openpty()
p = subprocess.Popen([sys.argv[1]], stdin=s, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
os.close(s)
os.write(m, b'{"jsonrpc":"2.0","id":1,"method":"escapePointer","params":{"path":["a/b"]}}\\n')
os.write(m, b'\\x04')
out, err = p.communicate(timeout=10)
print(json.dumps({"out": out.decode(), "err": err.decode(), "code": p.returncode}))
`;
    const r = JSON.parse(execFileSync("python3", ["-c", script, BINARY], { env: childEnv() }).toString()) as { out: string; err: string; code: number };
    expect(r.code).toBe(0);
    expect(r.out).toBe('{"jsonrpc":"2.0","id":1,"result":{"pointer":"/a~1b"}}\n');
    expect(r.err).toContain("reading JSON-RPC 2.0 from stdin");
    expect(r.err).toContain('"method":"escapePointer"');
    // No hint when stdin is a pipe.
    expect(agui([], stats).stderr).not.toContain("reading JSON-RPC");
  });
});

describe("one-shot subcommands", () => {
  it("normalize reads ops from stdin or a file, with --state, and prints {delta, skipped, state}", () => {
    const ops = '[{"op":"add","path":"/todos/-","value":"milk"},{"op":"remove","path":"/gone"}]';
    const fromStdin = agui(["normalize"], ops);
    expect(fromStdin.status).toBe(0);
    const out = JSON.parse(fromStdin.stdout) as { delta: unknown[]; skipped: { code: string }[]; state: unknown };
    expect(out.delta).toEqual([{ op: "add", path: "/todos", value: [] }, { op: "add", path: "/todos/-", value: "milk" }]);
    expect(out.skipped.map((s) => s.code)).toEqual(["PATH_NOT_FOUND"]);
    writeFileSync(path.join(work, "ops.json"), '[{"op":"replace","path":"/n","value":2}]');
    writeFileSync(path.join(work, "state.json"), '{"n":1,"keep":true}');
    const fromFile = agui(["normalize", "--state", "state.json", "ops.json"], "", {}, work);
    expect(JSON.parse(fromFile.stdout)).toEqual({ delta: [{ op: "replace", path: "/n", value: 2 }], skipped: [], state: { n: 2, keep: true } });
  });

  it("normalize --strict exits 1 when anything was skipped, and 0 when nothing was", () => {
    expect(agui(["normalize", "--strict", "-"], '[{"op":"remove","path":"/x"}]').status).toBe(1);
    expect(agui(["normalize", "--strict"], '[{"op":"add","path":"/x","value":1}]').status).toBe(0);
  });

  it("diff prints the delta between two files", () => {
    writeFileSync(path.join(work, "a.json"), JSON.stringify({ list: Array.from({ length: 100 }, (_, i) => i) }));
    writeFileSync(path.join(work, "b.json"), JSON.stringify({ list: [-1, ...Array.from({ length: 100 }, (_, i) => i)] }));
    const r = agui(["diff", "a.json", "b.json"], "", {}, work);
    expect([r.status, JSON.parse(r.stdout)]).toEqual([0, [{ op: "add", path: "/list/0", value: -1 }]]);
  });

  it("escape and parse convert between segments and pointers, -- letting segments start with a dash", () => {
    expect(agui(["escape", "toolState", "raster-ops/dataset", "~"]).stdout).toBe('"/toolState/raster-ops~1dataset/~0"\n');
    expect(agui(["escape", "--", "--help", "-"]).stdout).toBe('"/--help/-"\n');
    expect(agui(["parse", "/a~1b/~01"]).stdout).toBe('["a/b","~1"]\n');
  });

  // Issue 22: bad input exits 2, as a usage error does; exit 1 means "done, with problems to report" (exit-codes.test.ts has the whole table).
  it("exits 2 with a message on stderr for bad input: malformed JSON, missing files, bad pointers, unsafe integers", () => {
    for (const [args, input] of [
      [["normalize"], "[{"],
      [["normalize"], '{"op":"add"}'],
      [["diff", "missing.json", "also-missing.json"], ""],
      [["parse", "no-slash"], ""],
      [["normalize"], '[{"op":"add","path":"/id","value":12345678901234567890}]'],
    ] as [string[], string][]) {
      const r = agui(args, input, {}, work);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toMatch(/^agui-state [a-z]+: .+\n$/);
    }
  });

  it("shows help for the command and for each subcommand, and the version", () => {
    expect(agui(["--help"]).stdout).toContain("Usage:");
    for (const sub of ["serve", "normalize", "diff", "escape", "parse"]) {
      const viaFlag = agui(sub === "serve" ? ["--help"] : [sub, "--help"]).stdout;
      expect(viaFlag, sub).toContain(`agui-state ${sub === "serve" ? "" : sub}`.trim());
      expect(agui(["help", sub]).stdout, sub).toContain(sub === "serve" ? "AGUI_STATE_MAX_THREADS" : `agui-state ${sub}`);
    }
    expect(agui(["help", "serve"]).stdout).toMatch(/--max-message-bytes[\s\S]*AGUI_STATE_MAX_MESSAGE_BYTES/);
    // Every method of the protocol, activities included, is named in the serve help.
    const serveHelp = agui(["help", "serve"]).stdout.split(/\s+/);
    for (const method of Object.keys(METHOD_PARAMS)) expect(serveHelp, method).toContain(method);
    expect(agui(["--version"]).stdout).toBe(`${pkg.version}\n`);
  });
});

describe("the single binary", () => {
  it("runs alone: copied into an empty directory with no node_modules, it still serves", () => {
    const alone = mkdtempSync(path.join(tmpdir(), "agui-alone-"));
    try {
      const copy = path.join(alone, "agui-state");
      copyFileSync(BINARY, copy);
      execFileSync("chmod", ["755", copy]);
      const r = spawnSync(copy, [], { input: stats, cwd: alone, env: { PATH: "/usr/bin:/bin" }, timeout: 15_000 });
      expect(r.status).toBe(0);
      expect(limitsOf(r.stdout.toString()).maxOps).toBe(10_000);
      expect(r.stderr.toString()).toBe("");
    } finally {
      rmSync(alone, { recursive: true, force: true });
    }
  });
});
