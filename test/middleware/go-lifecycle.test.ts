import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { HttpAgent, type Message } from "@ag-ui/client";
import fastJsonPatch, { type Operation } from "fast-json-patch";
import { afterAll, beforeAll, describe, expect, vi } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { goBuild } from "../../scripts/harness/go.js";
import { BINARY, start, type Sidecar } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";

/**
 * Issue 40, Go: the lifecycle table (test/fixtures/lifecycle/cases.json), each
 * case's stream sent by a real net/http server (clients/go/examples/
 * lifecycleagent) through aguistate.Middleware with Lifecycle "repair" into
 * the real HttpAgent. A case that ends "reset" has its handler panic after its
 * last event (http.ErrAbortHandler, or a plain panic): the middleware writes
 * closeStream's text, and when the sidecar ended the run there (closeStream's
 * `ended`) ends the response cleanly, so the client gets a whole, failed run.
 * The checks are the shared table's (its `about`); the negative control is
 * the same server's /pass (Lifecycle "pass") and /default (none: the
 * default, pass): there every case with a mend fails in the client.
 */
const { test } = toolchain("Go (golang-go)", ["go", "version"]);

const TABLE = path.join(ROOT, "test/fixtures/lifecycle/cases.json");
type Event = Record<string, unknown> & { type: string };
interface LifecycleCase {
  name: string;
  issue: string;
  end: "eof" | "reset";
  input: { threadId: string; runId: string; state: Record<string, unknown> };
  events: Event[];
  expect: { run: "finished" | "error"; errorCode?: string; mends: string[] };
}
const CASES = (JSON.parse(readFileSync(TABLE, "utf8")) as { cases: LifecycleCase[] }).cases;

let tmp = "";
let exe = "";
// A response broken off (a reset under "pass"): @ag-ui/client 1.0.0 (runHttpRequest) cancels the failed
// body's reader and rethrows what that cancel rejects with from a promise nobody holds, an unhandled
// rejection after the run already failed, at a moment of its own (as in python-resume.test.ts). For this
// file's tests, such a cancel resolves.
let handled: { mockRestore: () => void } | undefined;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "agui-mw-go-life-"));
  if (spawnSync("go", ["version"], { stdio: "ignore" }).status === 0) exe = goBuild(path.join(ROOT, "clients/go"), "./examples/lifecycleagent", tmp);
  const cancel = ReadableStreamDefaultReader.prototype.cancel;
  handled = vi.spyOn(ReadableStreamDefaultReader.prototype, "cancel").mockImplementation(function (this: ReadableStreamDefaultReader, reason?: unknown) {
    return cancel.call(this, reason).catch(() => undefined);
  });
}, 620_000);
afterAll(() => {
  handled?.mockRestore();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** Starts the server (the kill registry ends it after the test) and reads its URL. */
async function startServer(): Promise<{ child: Sidecar; url: string }> {
  const child = start({ name: "lifecycleagent", file: exe, args: ["-cases", TABLE] }, [], { AGUI_STATE_BIN: BINARY });
  await child.until(() => child.stdout.includes("\n"), "the server's URL");
  return { child, url: child.stdout.toString("utf8").trim() };
}

/** Each delta of `type`, joined in order per the id in `key`. */
function joined(events: Event[], type: string, key: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of events) if (e.type === type) out.set(String(e[key]), (out.get(String(e[key])) ?? "") + String(e["delta"]));
  return out;
}

/** The input's state with every STATE_SNAPSHOT (replace) and STATE_DELTA of the case applied in order. */
function expectedState(c: LifecycleCase): unknown {
  let state: unknown = structuredClone(c.input.state);
  for (const e of c.events) {
    if (e.type === "STATE_SNAPSHOT") state = structuredClone(e["snapshot"]);
    if (e.type === "STATE_DELTA") state = fastJsonPatch.applyPatch(state, structuredClone(e["delta"] as Operation[]), true, false).newDocument;
  }
  return state;
}

/**
 * Runs the case through `url` with the real HttpAgent and returns every check
 * of the contract it fails (none: it passed).
 */
async function failures(url: string, c: LifecycleCase): Promise<string[]> {
  const agent = new HttpAgent({ url, threadId: c.input.threadId, initialState: structuredClone(c.input.state) });
  let finished = false;
  const errorCodes: string[] = [];
  const failed: string[] = [];
  // The client's console.error on a rejected run is its own report of it: kept as a failure, not printed.
  const error = vi.spyOn(console, "error").mockImplementation(() => undefined);
  const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void failed.push(`the client warned: ${String(a[0]).slice(0, 300)}`));
  try {
    await agent.runAgent({ runId: c.input.runId }, {
      onRunFinishedEvent: () => void (finished = true),
      onRunErrorEvent: ({ event }) => void errorCodes.push(event.code ?? ""),
    });
  } catch (e) {
    failed.push(`runAgent rejected: ${String(e).slice(0, 300)}`);
  } finally {
    error.mockRestore();
    warn.mockRestore();
  }
  if (c.expect.run === "finished" && !finished) failed.push("no onRunFinishedEvent");
  if (c.expect.run === "error" && !errorCodes.includes(c.expect.errorCode ?? "")) failed.push(`no onRunErrorEvent ${c.expect.errorCode ?? ""} (got ${JSON.stringify(errorCodes)})`);
  const messages = agent.messages as Message[];
  for (const [id, text] of joined(c.events, "TEXT_MESSAGE_CONTENT", "messageId")) {
    const got = messages.find((m) => m.id === id)?.content;
    if (got !== text) failed.push(`message ${id}: ${JSON.stringify(got)}, want ${JSON.stringify(text)}`);
  }
  const calls = messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
  for (const [id, args] of joined(c.events, "TOOL_CALL_ARGS", "toolCallId")) {
    const got = calls.find((t) => t.id === id)?.function.arguments;
    if (got !== args) failed.push(`tool call ${id}: ${JSON.stringify(got)}, want ${JSON.stringify(args)}`);
  }
  if (JSON.stringify(agent.state) !== JSON.stringify(expectedState(c))) failed.push(`state ${JSON.stringify(agent.state)}, want ${JSON.stringify(expectedState(c))}`);
  return failed;
}

/** The server's whole log lines so far. */
const logOf = (child: Sidecar): string => child.stderr.slice(0, child.stderr.lastIndexOf("\n") + 1);

/** Waits for a line of the server's log that matches `line` (the log comes on a pipe of its own, after the response). */
async function logged(child: Sidecar, line: RegExp): Promise<string> {
  await child.until(() => line.test(logOf(child)), `a log line ${String(line)}`);
  return logOf(child);
}

describe("the lifecycle table through the Go middleware, Lifecycle \"repair\"", () => {
  test.each(CASES.map((c, i) => [c.name, c.issue, i] as const))("%s (%s)", async (_name, _issue, i) => {
    const c = CASES[i] as LifecycleCase;
    const server = await startServer();
    expect(await failures(`${server.url}/agent?case=${i}`, c)).toEqual([]);
    // Each mend the table names, as the Go middleware reported it (its Findings; the run closeStream ended among them).
    for (const code of c.expect.mends) await logged(server.child, new RegExp(`^/agent: finding ${code} (mended|discarded)$`, "m"));
    if (c.end === "reset") {
      // http.ErrAbortHandler asks for a quiet abort: one line of the middleware's, no stack, and no net/http line.
      const log = await logged(server.child, /^agui-state: \/agent: the handler aborted/m);
      expect(log.match(/^agui-state: \/agent: the handler aborted \(net\/http: abort Handler\); the sidecar ended its run/gm)).toHaveLength(1);
      expect(log).not.toMatch(/goroutine \d|http: panic serving/);
    }
  }, 120_000);

  test("a plain panic after the last event: the same whole, failed run, and the panic logged once, with its stack", async () => {
    const i = CASES.findIndex((c) => c.end === "reset");
    const c = CASES[i] as LifecycleCase;
    const server = await startServer();
    expect(await failures(`${server.url}/agent?case=${i}&panic=plain`, c)).toEqual([]);
    const log = await logged(server.child, /^goroutine \d+ \[running\]:$/m); // the stack, after the line
    expect(log.match(/^agui-state: \/agent: the handler panicked: the agent failed \(.*\); the sidecar ended its run/gm)).toHaveLength(1);
    expect(log).not.toMatch(/http: panic serving/);
  }, 120_000);
});

describe("the negative control: the same server, Lifecycle \"pass\" and none (the default)", () => {
  test("every case with a mend fails in the client; the one without passes", async () => {
    const server = await startServer();
    for (const path of ["/pass", "/default"]) {
      for (const [i, c] of CASES.entries()) {
        const failed = await failures(`${server.url}${path}?case=${i}`, c);
        if (c.expect.mends.length > 0) expect(failed, `${path}: ${c.name}`).not.toEqual([]);
        else expect(failed, `${path}: ${c.name}`).toEqual([]);
      }
    }
  }, 120_000);
});
