import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/options.js";
import { parseProxyArgs } from "../../src/cli/proxy.js";

/**
 * The resume flags' credential model (protocol/README.md §16, issue 38), as `proxy` and the sidecar
 * parse them (src/cli/resume-flags.ts): what makes a credential, the anonymous reload opt-in, the
 * secret the key is made from, and the run cap; each with its environment variable.
 */
const UP = ["--upstream", "http://127.0.0.1:8000"];
const resume = (argv: string[], env: NodeJS.ProcessEnv = {}) => parseProxyArgs([...UP, ...argv], env).resume;
const secretFile = (text: string): string => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "agui-secret-")), "secret");
  fs.writeFileSync(file, text);
  return file;
};

describe("the resume flags' credential model", () => {
  it("by default: Authorization alone, no anonymous reload, no secret (a key per process), 10,000 runs", () => {
    expect(resume([])).toMatchObject({ policy: { parts: [{ kind: "header", name: "authorization" }], connectAnonymous: false }, maxRuns: 10_000 });
    expect(resume([])?.secret).toBeUndefined();
  });

  it("--credential, repeatable, names headers (any case) and cookies (exact); AGUI_STATE_CREDENTIALS when no flag is given", () => {
    expect(resume(["--credential", "header:X-Api-Key", "--credential", "cookie:Session", "--credential", "header:x-api-key"])?.policy.parts).toEqual([
      { kind: "header", name: "x-api-key" },
      { kind: "cookie", name: "Session" },
    ]);
    expect(resume([], { AGUI_STATE_CREDENTIALS: "cookie:sid, header:authorization" })?.policy.parts).toEqual([
      { kind: "cookie", name: "sid" },
      { kind: "header", name: "authorization" },
    ]);
    expect(resume(["--credential", "header:a"], { AGUI_STATE_CREDENTIALS: "cookie:sid" })?.policy.parts).toEqual([{ kind: "header", name: "a" }]);
    expect(() => resume(["--credential", "x-api-key"])).toThrow(UsageError);
    expect(() => resume(["--credential", "query:token"])).toThrow(/--credential: expected header:NAME or cookie:NAME/);
  });

  it("--connect-anonymous or AGUI_STATE_CONNECT_ANONYMOUS=1 opts in to reloading anonymous runs", () => {
    expect(resume(["--connect-anonymous"])?.policy.connectAnonymous).toBe(true);
    expect(resume([], { AGUI_STATE_CONNECT_ANONYMOUS: "1" })?.policy.connectAnonymous).toBe(true);
    expect(resume([], { AGUI_STATE_CONNECT_ANONYMOUS: "yes" })?.policy.connectAnonymous).toBe(false);
  });

  it("the secret: --secret-file (its last newline dropped), AGUI_STATE_SECRET_FILE, AGUI_STATE_SECRET; at least 32 bytes", () => {
    const text = "s".repeat(40);
    expect(resume(["--secret-file", secretFile(`${text}\n`)])?.secret?.toString()).toBe(text);
    expect(resume([], { AGUI_STATE_SECRET_FILE: secretFile(text) })?.secret?.toString()).toBe(text);
    expect(resume([], { AGUI_STATE_SECRET: text })?.secret?.toString()).toBe(text);
    expect(() => resume(["--secret-file", secretFile("short\n")])).toThrow(/at least 32 bytes, got 5/);
    expect(() => resume(["--secret-file", "/nonexistent/secret"])).toThrow(/--secret-file: cannot read "\/nonexistent\/secret": ENOENT/);
  });

  it("--max-runs takes a whole number of at least 1; with --store none no resume flag has any effect", () => {
    expect(resume(["--max-runs", "5"])?.maxRuns).toBe(5);
    expect(() => resume(["--max-runs", "0"])).toThrow(/--max-runs/);
    expect(() => resume(["--store", "none", "--credential", "cookie:sid"])).toThrow(/--credential has no effect with --store none/);
  });
});
