import { afterEach, expect, it, vi } from "vitest";
import { EXIT } from "../../src/cli/exit.js";
import { runCli } from "../../src/cli/run.js";

/**
 * `serve`'s failures follow the same table as the other commands' (src/cli/exit.ts): a bug of ours
 * while serving says "internal error" with the stack and exits 70, not Node's 1 for an unhandled
 * rejection, which would read as "the input had problems". The sidecar's start is replaced by one
 * that fails as a bug would.
 */
const bug = new TypeError("cannot read properties of undefined (reading 'limits')");
vi.mock("../../src/cli/serve.js", () => ({ serveCommand: () => Promise.reject(bug) }));

afterEach(() => {
  vi.restoreAllMocks();
  process.exitCode = undefined;
});

it("a bug while serving: internal error with the stack on stderr, exit 70 at once, nothing on stdout", async () => {
  let stderr = "";
  let stdout = "";
  vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => ((stderr += String(chunk)), true));
  vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => ((stdout += String(chunk)), true));
  const exited = new Promise<number | string | null | undefined>((resolve) => {
    vi.spyOn(process, "exit").mockImplementation(((code?: number | string | null) => void resolve(code ?? process.exitCode)) as typeof process.exit);
  });
  runCli(["serve", "--log-level", "silent"]);
  expect(await exited).toBe(EXIT.internal);
  expect(stderr).toMatch(/^agui-state serve: internal error \(a bug in agui-state, not a problem with the input; please report it with what follows\): TypeError: cannot read properties/);
  expect(stderr).toContain(bug.stack as string);
  expect(stdout).toBe("");
});
