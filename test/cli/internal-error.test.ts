import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import { guardedRead, input } from "../../src/cli/stream-command.js";
import { EXIT, EXIT_TABLE } from "../../src/cli/exit.js";
import { internalError } from "../../src/cli/run.js";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * A stream command tells the input's problems from its own bugs: a file that
 * cannot be read exits 2 with one line naming it; anything else thrown is a
 * bug, which must not read as "unreadable" (2) nor as "the input had
 * problems" (1, Node's own status for an uncaught error). It goes on to the
 * command line's handler, which says "internal error" with the stack and
 * exits 70 (src/cli/exit.ts).
 */
const dir = mkdtempSync(path.join(tmpdir(), "agui-internal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => vi.restoreAllMocks());

/** Runs `fn` with stderr captured; resolves with what it returned (or threw) and what stderr got. */
async function withStderr<T>(fn: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; stderr: string }> {
  let stderr = "";
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
    stderr += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    return true;
  });
  const [result] = await Promise.allSettled([fn()]);
  vi.restoreAllMocks();
  return { result: result as PromiseSettledResult<T>, stderr };
}

/** A stream command's body that reads all of `file`, as check and fix do. */
const reads = (file: string) => async (): Promise<number> => {
  for await (const chunk of input(file)) void chunk;
  return EXIT.done;
};

describe("a stream command's failures", () => {
  it("a file that does not exist is the input's problem: exit 2, one line naming it and the system's code", async () => {
    const missing = path.join(dir, "missing.sse");
    const { result, stderr } = await withStderr(() => guardedRead("check", reads(missing)));
    expect(result).toEqual({ status: "fulfilled", value: EXIT.refused });
    expect(stderr.split("\n").filter(Boolean)).toHaveLength(1);
    expect(stderr).toMatch(/^agui-state check: /);
    expect(stderr).toContain(missing);
    expect(stderr).toContain("ENOENT");
    expect(stderr).not.toContain("internal error");
  });

  it("a directory given as the stream is the input's problem too (EISDIR): exit 2", async () => {
    const { result, stderr } = await withStderr(() => guardedRead("fix", reads(dir)));
    expect(result).toEqual({ status: "fulfilled", value: EXIT.refused });
    expect(stderr).toMatch(/^agui-state fix: /);
    expect(stderr).toContain("EISDIR");
  });

  it("anything else thrown is a bug: it goes on, the same error, to the command line's handler, and nothing is said of the input", async () => {
    const bug = new TypeError("cannot read properties of undefined (reading 'kind')");
    const { result, stderr } = await withStderr(() =>
      guardedRead("check", () => {
        throw bug;
      }),
    );
    expect(result).toEqual({ status: "rejected", reason: bug });
    expect(stderr).toBe("");
  });

  it("the handler's text says internal error, not the input's fault, and gives the stack to report", () => {
    const bug = new TypeError("boom");
    const text = internalError("check", bug);
    expect(text).toMatch(/^agui-state check: internal error \(a bug in agui-state, not a problem with the input; please report it with what follows\): TypeError: boom\n/);
    expect(text).toContain(bug.stack as string);
    expect(text.endsWith("\n")).toBe(true);
    expect(internalError(undefined, "not an Error")).toBe("agui-state: internal error (a bug in agui-state, not a problem with the input; please report it with what follows): not an Error\n");
  });
});

describe("the exit statuses", () => {
  it("every status is in --help's table and in docs/cli.md's, and none is shared", () => {
    const codes = Object.values(EXIT);
    expect(new Set(codes).size).toBe(codes.length);
    const doc = readFileSync(path.join(ROOT, "docs/cli.md"), "utf8");
    for (const code of codes) {
      expect(EXIT_TABLE, `--help's table lacks ${code}`).toMatch(new RegExp(`^ {2}${code} {1,2}\\S`, "m"));
      expect(doc, `docs/cli.md's table lacks ${code}`).toContain(`| ${code} | `);
    }
    const rows = [...doc.matchAll(/^\| (\d+) \| /gm)].map((m) => Number(m[1]));
    expect(rows.sort((a, b) => a - b)).toEqual([...codes].sort((a, b) => a - b));
    expect(doc).toContain(`with one of ${["no", "one", "two", "three", "four", "five"][codes.length]} statuses`);
  });
});
