import { anyId } from "../../scripts/harness/sse-ids.js";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, type it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { childEnv } from "../../scripts/harness/process.js";
import { allBlocks, type Scenario, steps, type Step } from "./blocks.js";
import { type Result, ScenarioShell } from "./scenario.js";

/** One block's timeout: `npm ci` and a build on a loaded machine. A hang guard, not a figure under test. */
const BLOCK_MS = 900_000;

/** A `$ ` transcript: each command and the stdout that follows it. */
export function transcript(body: string): { command: string; expected: string }[] {
  const out: { command: string; expected: string }[] = [];
  for (const line of body.replace(/\n$/, "").split("\n")) {
    if (line.startsWith("$ ")) out.push({ command: line.slice(2), expected: "" });
    else if (out.length) (out[out.length - 1] as { expected: string }).expected += line + "\n";
  }
  return out;
}

/**
 * The environment a reader's shell has: no npm_* variables of the npm running
 * the tests, no loader hooks, no AGUI_STATE_* settings, no pip configuration of
 * this machine's, and a plain PATH (node's folder, then the system's), so that
 * `python3` is the system's. npm takes packages from its cache when it has them
 * (`prefer-offline`: .ci/run's `npm ci` filled it) and asks nothing of the
 * registry's audit or funding; pip checks for no newer pip. Caches that would
 * land in the home folder (Go's) go into the scenario's folder.
 */
export function readerEnv(work: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(childEnv())) {
    if (v === undefined || /^(npm_|PIP_|PYTHON|VIRTUAL_ENV$|GO|CLOJURE|JAVA_TOOL_OPTIONS$)/i.test(k)) continue;
    env[k] = v;
  }
  return {
    ...env,
    PATH: [path.dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin"].join(":"),
    npm_config_prefer_offline: "true",
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    PIP_NO_INPUT: "1",
    GOPATH: path.join(work, "gopath"),
    GOCACHE: path.join(work, "gocache"),
    GOENV: "off",
    GOWORK: "off",
    GOTOOLCHAIN: "local",
    ...extra,
  };
}

function explain(r: Result): string {
  return `exit ${r.status}\n--- stdout ---\n${r.stdout}\n--- stderr ---\n${r.stderr}`;
}

export interface Setting {
  /** The checkout whose README.md and docs/ hold the blocks: a fresh clone's own, or this one. */
  docs: string;
  /** Where the first block runs. */
  cwd: string;
  env: Record<string, string>;
}

/**
 * Defines one test per block of `scenario`, run in order by a ScenarioShell in
 * the setting `prepare` makes (a fresh clone whose own README is read, or an
 * empty folder). A block after one that failed fails too, naming the first
 * failure. `prepare` runs when the file is collected, and only if the
 * scenario's toolchain is here.
 */
export function describeScenario(scenario: Scenario, test: typeof it, available: boolean, prepare: (work: string) => Setting): void {
  const work = mkdtempSync(path.join(tmpdir(), `agui-readme-${scenario}-`));
  const setting = available ? prepare(work) : undefined;
  const list: Step[] = steps(allBlocks(setting?.docs ?? ROOT), scenario);
  describe(`the ${scenario} scenario's blocks, run as shown`, () => {
    let shell: ScenarioShell | undefined;
    let broken = "";
    let last: Result | undefined;

    beforeAll(async () => {
      if (!setting) return;
      shell = new ScenarioShell(work, setting.cwd, setting.env, BLOCK_MS);
      await shell.choosePorts(list);
    }, BLOCK_MS);

    afterAll(() => {
      shell?.close();
      rmSync(work, { recursive: true, force: true });
    });

    test("has blocks to run", () => {
      expect(list.length).toBeGreaterThan(0);
    });

    for (const step of list) {
      const { block, kind, args } = step;
      const title = `${block.file}:${block.line} ${kind}${args.length ? " " + args.join(" ") : ""}`;
      test(title, async () => {
        if (broken) throw new Error(`not run: ${broken} failed before it`);
        const sh = shell as ScenarioShell;
        try {
          if (kind === "file") sh.file(args[0] as string, block.body);
          else if (kind === "output") {
            expect(last, "the block this output belongs to ran").toBeDefined();
            // A trailing blank line the README leaves out (a stream's last event) is one liberty taken; the
            // other: an event id (protocol/README.md §16) is random, so any of ours stands for the one shown.
            expect(anyId((last as Result).stdout.replace(/\n+$/, "\n")), title).toBe(anyId(block.body.replace(/\n+$/, "\n")));
          } else if (kind === "transcript") {
            for (const { command, expected } of transcript(block.body)) {
              const r = sh.run(command);
              expect(r.status, `${command}\n${explain(r)}`).toBe(0);
              expect(r.stdout, command).toBe(expected);
            }
          } else {
            last = kind === "serve" ? await sh.serve(block.body, args) : sh.run(block.body);
            expect(last.status, `${block.file}:${block.line}\n${sh.text(block.body)}\n${explain(last)}`).toBe(0);
          }
        } catch (err) {
          broken ||= title;
          throw err;
        }
      }, BLOCK_MS);
    }
  });
}

/** A fresh clone of the committed HEAD of this repository, at `work`/agui-state. */
export function freshClone(work: string): string {
  const dir = path.join(work, "agui-state");
  execFileSync("git", ["clone", "--quiet", ROOT, dir], { stdio: ["ignore", "ignore", "inherit"], env: childEnv() });
  return dir;
}
