import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { SEA, run } from "../../scripts/harness/process.js";
import { startProxy } from "../proxy/proxy-process.js";
import { CASES, caseFailures, caseSse, clientFailed, runCase, serveCase, serveText, unnamedInCheck, unnamedInReport, type CheckLine, type LifecycleCase, type Served } from "./table.js";

/**
 * The lifecycle table (issue 40) through `agui-state fix` and `agui-state
 * proxy`, the real binary, into the real @ag-ui/client HttpAgent: each case's
 * run ends as the table says, with every text and tool-call delta and the
 * exact state. The repair is opt-in (protocol/README.md §13):
 * `--lifecycle repair` here; `check --json` names each
 * break with the mend `fix --lifecycle repair` makes, and `fix --report` each
 * mend it made. The negative control is the default (pass): every case that
 * needs a mend still fails in the client.
 */

const work = mkdtempSync(path.join(tmpdir(), "agui-lifecycle-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

// A response broken off (the negative control): @ag-ui/client 1.0.0 (runHttpRequest) cancels the failed body's
// reader and rethrows that cancel's rejection from a promise nobody holds, after the run already failed, at a
// moment of its own (as in the Go and Python runners). For this file's tests such a cancel resolves; the break
// itself still reaches the client, and is what the negative control asserts.
let quiet: { mockRestore: () => void } | undefined;
beforeAll(() => {
  const cancel = ReadableStreamDefaultReader.prototype.cancel;
  quiet = vi.spyOn(ReadableStreamDefaultReader.prototype, "cancel").mockImplementation(function (this: ReadableStreamDefaultReader, reason?: unknown) {
    return cancel.call(this, reason).catch(() => undefined);
  });
});
afterAll(() => quiet?.mockRestore());

const servers: Served[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** The case's input state as a file, for --state: the baseline the client holds (RunAgentInput.state). */
function stateFile(c: LifecycleCase, i: number): string {
  const file = path.join(work, `state-${i}.json`);
  writeFileSync(file, JSON.stringify(c.input.state));
  return file;
}

/** `agui-state ARGS` over the case's stream on stdin: its stdout and stderr. */
async function aguiRun(args: string[], c: LifecycleCase): Promise<{ stdout: string; stderr: string }> {
  const r = await run(SEA, args, caseSse(c));
  // 0, or 1 when an event the client refuses went out as it came (fix) or was found (check); 2 is a usage error.
  expect([0, 1], r.stderr).toContain(r.code);
  return { stdout: r.stdout.toString("utf8"), stderr: r.stderr };
}

const agui = async (args: string[], c: LifecycleCase): Promise<string> => (await aguiRun(args, c)).stdout;

/** Serves text as the framework would, then runs HttpAgent against it. */
async function runServed(text: string, c: LifecycleCase): ReturnType<typeof runCase> {
  const server = await serveText(text, "eof");
  servers.push(server);
  return runCase(`${server.url}/agent`, c);
}

async function throughProxy(c: LifecycleCase, args: string[] = []): ReturnType<typeof runCase> {
  const framework = await serveCase(c);
  servers.push(framework);
  const proxy = await startProxy(framework.url, args);
  return runCase(`${proxy.url}/agent`, c);
}

const table = CASES.map((c, i) => ({ c, i, label: `${c.name} (${c.issue})` }));
const mended = table.filter(({ c }) => c.expect.mends.length > 0);

describe("the lifecycle table through agui-state fix, into HttpAgent", () => {
  it.each(table)("$label", async ({ c, i }) => {
    // fix reads the stream to its end; how the framework ended it (eof or reset) is the end of its input either way.
    const fixed = await agui(["fix", "--lifecycle", "repair", "--state", stateFile(c, i)], c);
    expect(caseFailures(c, await runServed(fixed, c))).toEqual([]);
  });

  it.each(mended)("without repair (the default, pass) the client fails: $label", async ({ c, i }) => {
    const passed = await agui(["fix", "--state", stateFile(c, i)], c);
    // Every delta of the table applies as sent: without repair, fix passes the stream byte for byte.
    expect(passed).toBe(caseSse(c));
    const out = await runServed(passed, c);
    expect(clientFailed(out), JSON.stringify({ finished: out.finished, errors: out.errors })).toBe(true);
  });
});

describe("the lifecycle table through agui-state proxy in front of the framework, into HttpAgent", () => {
  it.each(table)("$label", async ({ c }) => {
    expect(caseFailures(c, await throughProxy(c, ["--lifecycle", "repair"]))).toEqual([]);
  });

  it.each(mended)("without repair (the default, pass) the client fails: $label", async ({ c }) => {
    const out = await throughProxy(c);
    expect(clientFailed(out), JSON.stringify({ finished: out.finished, errors: out.errors })).toBe(true);
  });
});

describe("what check and fix --report say of the lifecycle table", () => {
  it.each(table)("check --json names each break with the mend fix --lifecycle repair makes: $label", async ({ c, i }) => {
    const text = await agui(["check", "--json", "--state", stateFile(c, i)], c);
    const lines = text
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l) as CheckLine);
    expect(unnamedInCheck(c, lines), text).toEqual([]);
  });

  it.each(table)("fix --lifecycle repair --report says each mend, mended or discarded: $label", async ({ c, i }) => {
    const { stderr } = await aguiRun(["fix", "--lifecycle", "repair", "--report", "--state", stateFile(c, i)], c);
    expect(unnamedInReport(c, stderr), stderr).toEqual([]);
  });
});
