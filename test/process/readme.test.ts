import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { childEnv } from "../../scripts/harness/process.js";
import { ROOT } from "../../scripts/harness/fixtures.js";

/**
 * Every command in the README is run, here or by .ci/run, so none can rot:
 * - a ```sh block with "$ " prompts is a transcript: each command runs in bash
 *   with dist/ on PATH, and its stdout must be exactly the lines that follow;
 * - a ```python block followed by a ```text block runs and prints that text;
 * - a ```sh block without prompts (set-up commands) must be run by .ci/run.
 */
const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
const blocks = [...readme.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1] as string, body: m[2] as string }));
const ci = readFileSync(path.join(ROOT, ".ci/run"), "utf8");
const env = childEnv({ PATH: `${path.join(ROOT, "dist")}:${process.env["PATH"] ?? ""}` });
const work = mkdtempSync(path.join(tmpdir(), "agui-readme-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

interface Step {
  command: string;
  expected: string;
}

function transcript(body: string): Step[] {
  const steps: Step[] = [];
  for (const line of body.replace(/\n$/, "").split("\n")) {
    if (line.startsWith("$ ")) steps.push({ command: line.slice(2), expected: "" });
    else if (steps.length) (steps[steps.length - 1] as Step).expected += line + "\n";
  }
  return steps;
}

describe("the README's commands", () => {
  const shell = blocks.filter((b) => b.lang === "sh");
  const transcripts = shell.filter((b) => b.body.startsWith("$ "));

  it("has transcripts, a Python example and set-up commands to check", () => {
    expect(transcripts.length).toBeGreaterThan(0);
    expect(blocks.filter((b) => b.lang === "python")).toHaveLength(1);
    expect(shell.length).toBeGreaterThan(transcripts.length);
  });

  for (const [i, block] of transcripts.entries()) {
    it(`shell transcript ${i + 1} prints exactly what the README shows`, () => {
      for (const step of transcript(block.body)) {
        const r = spawnSync("bash", ["-euo", "pipefail", "-c", step.command], { cwd: work, env, timeout: 15_000 });
        expect(r.status, `${step.command}\n${r.stderr.toString()}`).toBe(0);
        expect(r.stdout.toString(), step.command).toBe(step.expected);
      }
    });
  }

  it("the Python example prints the events the README shows", () => {
    const at = blocks.findIndex((b) => b.lang === "python");
    const code = blocks[at]?.body as string;
    const expected = blocks[at + 1];
    expect(expected?.lang).toBe("text");
    const out = execFileSync("python3", ["-c", code], { env, cwd: work, timeout: 15_000 }).toString();
    expect(out).toBe(expected?.body);
  });

  it("every set-up command is run by .ci/run", () => {
    for (const block of shell.filter((b) => !b.body.startsWith("$ "))) {
      for (const line of block.body.split("\n").filter(Boolean)) {
        const command = line.replace(/\s+#.*$/, "").trim();
        for (const part of command.split("&&").map((p) => p.trim())) expect(ci, part).toMatch(new RegExp(`^\\s*${part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*$`, "m"));
      }
    }
  });
});
