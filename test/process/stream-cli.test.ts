import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BINARY, SEA, childEnv, run, start } from "../../scripts/harness/process.js";

/**
 * `agui-state check` and `agui-state fix`, as the real binary runs them:
 * exit codes, --json, --report on stderr, SSE passed byte for byte, and
 * streaming (each event out before the input ends).
 */

function agui(args: string[], input = "") {
  const r = spawnSync(BINARY, args, { input, env: childEnv(), timeout: 15_000 });
  return { status: r.status, stdout: r.stdout.toString("utf8"), stderr: r.stderr.toString("utf8") };
}

const J = (e: unknown) => JSON.stringify(e);
const started = J({ type: "RUN_STARTED", threadId: "t", runId: "r" });
const finished = J({ type: "RUN_FINISHED", threadId: "t", runId: "r" });
const appendMilk = J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos/-", value: "milk" }] });
const replaceSteps = J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/steps", value: [] }] });
const clean = [started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/a", value: 1 }] }), finished].join("\n") + "\n";
const broken = [started, appendMilk, replaceSteps, finished].join("\n") + "\n";

const work = mkdtempSync(path.join(tmpdir(), "agui-stream-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = path.join(work, name);
  writeFileSync(p, text);
  return p;
};

describe("agui-state check", () => {
  it("exits 0 when the client applies everything, with only the summary line", () => {
    const r = agui(["check"], clean);
    expect([r.status, r.stdout, r.stderr]).toEqual([0, "3 events, 1 delta: the client applies every one\n", ""]);
  });

  it("exits 1 and prints one line per finding, with its line, event, op, code and hint, then the summary", () => {
    const r = agui(["check", file("broken.ndjson", broken)]);
    expect(r.status).toBe(1);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^line 2, event 2 \(STATE_DELTA\): dropped: op 0 at "\/todos\/-": PATH_NOT_FOUND: .*Hint: `\/todos` does not exist: add it as `\[\]` first \(`fix` does this\)$/);
    expect(lines[1]).toMatch(/^line 3, event 3 \(STATE_DELTA\): dropped: op 0 at "\/steps": PATH_NOT_FOUND: /);
    expect(lines[2]).toBe("4 events, 2 deltas: 2 dropped, 0 ignored, 0 fatal");
  });

  it("reports an SSE stream framed with CRLF, which the client reads as one event, and fix writes it with LF", () => {
    const crlf = [started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/a", value: 1 }] }), finished].map((e) => `data: ${e}\r\n\r\n`).join("");
    const r = agui(["check", "--json"], crlf);
    expect(r.status).toBe(1);
    const out = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out[0]).toMatchObject({ event: 1, line: 1, kind: "fatal", code: "SSE_LINE_ENDS" });
    expect(out[1]).toEqual({ summary: { events: 1, deltas: 0, dropped: 0, ignored: 0, fatal: 1, wiped: 0 } });
    const fixed = agui(["fix"], crlf);
    expect([fixed.status, fixed.stdout]).toEqual([0, crlf.replaceAll("\r\n", "\n")]);
    expect(agui(["check"], fixed.stdout).status).toBe(0);
  });

  it("gives NDJSON with --json: one object per finding, then the summary", () => {
    const sse = [started, appendMilk, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/a~b", value: 1 }] })].map((e) => `data: ${e}\n\n`).join("");
    const r = agui(["check", "--json", "-"], sse);
    expect(r.status).toBe(1);
    const out = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(out[0]).toEqual({ event: 2, line: 3, kind: "dropped", type: "STATE_DELTA", index: 0, pointer: "/todos/-", code: "PATH_NOT_FOUND", message: expect.any(String), hint: expect.stringContaining("add it as `[]`"), outcome: "passed", stops: true });
    expect(out[1]).toEqual({ event: 3, line: 5, kind: "fatal", type: "STATE_DELTA", index: 0, pointer: "/a~b", code: "INVALID_POINTER", message: expect.any(String), hint: "a `~` in a key is written `~0`: write `/a~0b`", outcome: "passed" });
    expect(out[2]).toEqual({ summary: { events: 3, deltas: 2, dropped: 1, ignored: 0, fatal: 1, wiped: 0 } });
  });

  it("starts from --state, and reports an ACTIVITY_DELTA before its snapshot as ignored", () => {
    const stream = [started, J({ type: "STATE_DELTA", delta: [{ op: "replace", path: "/n", value: 2 }] }), J({ type: "ACTIVITY_DELTA", messageId: "a1", activityType: "plan", patch: [] }), finished].join("\n");
    const ok = agui(["check", "--json", "--state", file("state.json", '{"n":1}')], stream);
    expect(ok.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { kind?: string; code?: string })).toEqual([{ event: 3, line: 3, kind: "ignored", type: "ACTIVITY_DELTA", code: "UNKNOWN_ACTIVITY", message: expect.any(String), hint: expect.any(String), outcome: "passed" }, { summary: { events: 4, deltas: 2, dropped: 0, ignored: 1, fatal: 0, wiped: 0 } }]);
  });

  it("exits 2 on a usage error or unreadable input, with one line on stderr and nothing on stdout", () => {
    for (const args of [["check", "--nope"], ["check", "a", "b"], ["check", path.join(work, "missing.sse")], ["check", "--state", path.join(work, "missing.json")], ["check", "--state", file("array.json", "[1]")], ["check", "--state", "-"], ["fix", "--json"], ["fix", "--own", "toolState"], ["fix", "--snapshots", "all"], ["check", "--own", "toolState"]]) {
      const r = agui(args, clean);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stdout, args.join(" ")).toBe("");
      expect(r.stderr.trimEnd().split("\n"), args.join(" ")).toHaveLength(1);
    }
  });
});

describe("issue 32: every op of a delta, through the binary", () => {
  // No /todos in the state: op 0 goes through a forbidden key, op 1 appends to a missing array, op 2 removes nothing, op 3 is fine.
  const ops = [
    { op: "add", path: "/__proto__/x", value: 1 },
    { op: "add", path: "/todos/-", value: "milk" },
    { op: "remove", path: "/nothere" },
    { op: "add", path: "/ok", value: true },
  ];
  const text = [J({ type: "RUN_STARTED", threadId: "t", runId: "r" }), J({ type: "STATE_DELTA", delta: ops }), J({ type: "RUN_FINISHED", threadId: "t", runId: "r" })].join("\n") + "\n";

  it("check names ops 0, 1 and 2, op 0 as where the client stops, in text and in --json", () => {
    const r = agui(["check", file("case2.ndjson", text)]);
    expect(r.status).toBe(1);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines.slice(0, -1).map((l) => /^line 2, event 2 \(STATE_DELTA\): dropped: op (\d)(?: at "[^"]*")?(, where the client stops)?: (\w+)/.exec(l)?.slice(1)))
      .toEqual([["0", ", where the client stops", "FORBIDDEN_KEY"], ["1", undefined, "PATH_NOT_FOUND"], ["2", undefined, "PATH_NOT_FOUND"]]);
    const json = agui(["check", "--json", path.join(work, "case2.ndjson")]).stdout.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(json.slice(0, -1).map((f) => [f["index"], f["code"], f["stops"]])).toEqual([[0, "FORBIDDEN_KEY", true], [1, "PATH_NOT_FOUND", undefined], [2, "PATH_NOT_FOUND", undefined]]);
  });

  it("fix --report names each op it changed or dropped, with its outcome", () => {
    const r = agui(["fix", "--report", path.join(work, "case2.ndjson")]);
    expect(r.status).toBe(0);
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines.slice(0, -1).map((l) => /as sent, (\w+): op (\d)/.exec(l)?.slice(1))).toEqual([["discarded", "0"], ["mended", "1"], ["discarded", "2"]]);
    expect(lines.at(-1)).toMatch(/findings by outcome: 0 passed, 1 mended, 2 discarded, 0 kept$/);
  });
});

describe("agui-state fix", () => {
  it("makes every delta apply and passes every other SSE byte through, comments and id lines included", () => {
    const sse = `: hello\nid: 1\ndata: ${started}\n\nid: 2\ndata: ${appendMilk}\n\n: ping\n\nid: 3\nevent: message\ndata: ${replaceSteps}\n\ndata: ${finished}\n\n`;
    const r = agui(["fix"], sse);
    expect([r.status, r.stderr]).toEqual([0, ""]);
    expect(r.stdout).toBe(
      `: hello\nid: 1\ndata: ${started}\n\n` +
        `id: 2\ndata: ${J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos", value: [] }, { op: "add", path: "/todos/-", value: "milk" }] })}\n\n` +
        `: ping\n\n` +
        `id: 3\nevent: message\ndata: ${J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/steps", value: [] }] })}\n\n` +
        `data: ${finished}\n\n`,
    );
  });

  it("keeps NDJSON as NDJSON: lines it leaves alone byte for byte, a fixed delta compact with the line's own ending", () => {
    const spaced = '{ "type": "RUN_STARTED", "threadId": "t", "runId": "r" }';
    const ok = '{"type":"STATE_DELTA", "delta":[{"op":"add","path":"/a","value":1.50}]}';
    const r = agui(["fix"], `${spaced}\r\n\n${ok}\r\n${appendMilk}\r\n${finished}`);
    expect([r.status, r.stderr]).toEqual([0, ""]);
    expect(r.stdout).toBe(`${spaced}\r\n\n${ok}\r\n${J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/todos", value: [] }, { op: "add", path: "/todos/-", value: "milk" }] })}\r\n${finished}`);
  });

  it("drops a delta left empty, keeping its id line, and an ACTIVITY_DELTA for an unknown activity", () => {
    const sse = [started, J({ type: "STATE_DELTA", delta: [{ op: "test", path: "/x", value: 1 }] }), J({ type: "ACTIVITY_DELTA", messageId: "a9", activityType: "plan", patch: [] }), finished].map((e, i) => `id: ${i}\ndata: ${e}\n\n`).join("");
    expect(agui(["fix"], sse).stdout).toBe(`id: 0\ndata: ${started}\n\nid: 1\n\nid: 2\n\nid: 3\ndata: ${finished}\n\n`);
  });

  it("writes --report's findings to stderr, each as check words it plus what fix did, and keeps stdout to the stream (issue 23)", () => {
    const r = agui(["fix", "--report", file("broken2.ndjson", broken)]);
    expect(r.status).toBe(0);
    expect(r.stdout.split("\n").filter(Boolean).map((l) => (JSON.parse(l) as { type: string }).type)).toEqual(["RUN_STARTED", "STATE_DELTA", "STATE_DELTA", "RUN_FINISHED"]);
    const checked = agui(["check", path.join(work, "broken2.ndjson")]).stdout.trimEnd().split("\n");
    const reported = r.stderr.trimEnd().split("\n");
    // The same findings, each saying it was mended, and no hint that sends the reader to fix while fix runs.
    expect(reported.slice(0, -1)).toEqual(checked.slice(0, -1).map((l) => l.replace(": dropped: ", ": dropped as sent, mended: ").replace(" (`fix` does this)", "")));
    expect(r.stderr).not.toContain("`fix` does this");
    // Issue 32: the outcomes in the words JSON and logs use.
    expect(reported.at(-1)).toBe(`${checked.at(-1) ?? ""}; findings by outcome: 0 passed, 2 mended, 0 discarded, 0 kept`);
  });

  it("takes --own from the command line: snapshots go as deltas on the owned member, the --state keys stand (issue 23)", () => {
    const snap = (toolState: object) => J({ type: "STATE_SNAPSHOT", snapshot: { toolState, notes: "n" } });
    const stream = [started, snap({ a: 1 }), snap({ a: 1, b: 2 }), snap({ a: 1, b: 2 }), finished].join("\n") + "\n";
    const state = file("client.json", '{"selectedLayer":"era5"}');
    const r = agui(["fix", "--state", state, "--own", "/toolState", "--report"], stream);
    expect(r.status).toBe(0);
    expect(r.stdout).toBe([started, J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState", value: { a: 1 } }] }), J({ type: "STATE_DELTA", delta: [{ op: "add", path: "/toolState/b", value: 2 }] }), finished].join("\n") + "\n");
    expect(r.stderr).toMatch(/^line 2, event 2 \(STATE_SNAPSHOT\): wiped as sent, kept: SNAPSHOT_WIPE: the snapshot leaves out \/selectedLayer/);
    const checked = agui(["check", "--json", "--state", state], stream);
    expect(checked.status).toBe(1);
    expect(checked.stdout).toContain('"kind":"wiped"');
  });

  it("exits 1 when an event the client refuses goes out as it came (a lifecycle break)", () => {
    const r = agui(["fix", "--report"], [appendMilk, started, finished].join("\n"));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/FIRST_EVENT/);
  });

  it("streams: each event is written as soon as it is complete, before the input ends", async () => {
    const fix = start(SEA, ["fix"]);
    await fix.write(`data: ${started}\n\n`);
    await fix.until(() => fix.stdout.toString().includes(started), "RUN_STARTED to come out");
    await fix.write(`data: ${appendMilk}\n`);
    await fix.write("\n");
    await fix.until(() => fix.stdout.toString().includes('"path":"/todos","value":[]'), "the fixed delta to come out");
    expect(fix.exited).toBeUndefined();
    fix.end(`data: ${finished}\n\n`);
    expect((await fix.waitForExit()).code).toBe(0);
    expect(fix.stdout.toString()).toContain(finished);
  });

  it("check streams its findings too", async () => {
    const check = start(SEA, ["check"]);
    await check.write(`${started}\n${appendMilk}\n`);
    await check.until(() => check.stdout.toString().includes("PATH_NOT_FOUND"), "the finding to come out");
    expect(check.exited).toBeUndefined();
    check.end(`${finished}\n`);
    expect((await check.waitForExit()).code).toBe(1);
  });

  it("stops quietly, exit 0, when the reader of its output goes away", () => {
    const custom = J({ type: "CUSTOM", name: "n", value: 1 });
    const input = file("long.ndjson", started + "\n" + `${custom}\n`.repeat(100_000));
    const r = spawnSync("bash", ["-c", `"${BINARY}" fix "${input}" | head -c 100 > /dev/null; echo "\${PIPESTATUS[0]}"`], { env: childEnv(), timeout: 15_000 });
    expect([r.stdout.toString(), r.stderr.toString()]).toEqual(["0\n", ""]);
  });
});

describe("help", () => {
  it("has a page for check, fix and proxy", async () => {
    for (const cmd of ["check", "fix", "proxy"]) {
      const r = await run(SEA, [cmd, "--help"], "");
      expect(r.code, cmd).toBe(0);
      expect(r.stdout.toString(), cmd).toMatch(new RegExp(`^agui-state ${cmd} `));
    }
    expect(agui(["--help"]).stdout).toMatch(/agui-state check \[FILE\|-\]/);
  });
});
