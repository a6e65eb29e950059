import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { afterAll, beforeAll, describe, expect, type it } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { untilPrinted } from "../../scripts/harness/printed.js";
import { BINARY, childEnv } from "../../scripts/harness/process.js";
import { againstDirect, bytesLine, snapshotsOften, stateBytes } from "./checks.js";
import { directly, loadFixtures, runThread, type Thread } from "./replay.js";

/**
 * One middleware's replay server (clients/<language>/.../replay...), started
 * once for the file and stopped after it (not by the kill registry, which
 * ends children after each test): every fixture of the framework through the
 * middleware with own = the fixture's `own`, into the real HttpAgent, against
 * the same answers with the framework alone.
 */

/** How long a server may take to listen (a JVM's start among them): a hang guard. */
const START_MS = 110_000;

export interface ServerSpec {
  /** What the middleware is, for the tests' names. */
  name: string;
  /** The command, run from the repository's root, with AGUI_STATE_BIN set to the built binary. */
  command: () => { file: string; args: string[] };
  /** The server's base URLs, each a way of serving (Jetty sync and async), from what it printed; undefined until it has. */
  urls: (stdout: string) => Record<string, string> | undefined;
  /** The lines of the server's stderr that say the middleware failed or could not repair (any, for a replay that must be clean). */
  complaints: (stderr: string) => string[];
}

interface Running {
  child: ChildProcessWithoutNullStreams;
  urls: Record<string, string>;
  stderr: string;
}

async function startServer(spec: ServerSpec): Promise<Running> {
  const { file, args } = spec.command();
  const child = spawn(file, args, { cwd: ROOT, env: childEnv({ AGUI_STATE_BIN: BINARY, PYTHONDONTWRITEBYTECODE: "1" }) });
  const running: Running = { child, urls: {}, stderr: "" };
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d: string) => (running.stderr += d));
  running.urls = await untilPrinted(child, spec.urls, { what: `${spec.name}: the server`, ms: START_MS, stderr: () => running.stderr });
  return running;
}

/** The suite of `spec`'s middleware over every fixture of `framework`; `test` is the toolchain's (skipped, or failed under CI, without it). */
export function middlewareSuite(framework: string, spec: ServerSpec, toolchain: { available: boolean; test: typeof it }): void {
  const fixtures = loadFixtures(framework);
  let direct = new Map<string, Thread>();
  let server: Running | undefined;
  beforeAll(async () => {
    direct = await directly(fixtures);
    if (toolchain.available) server = await startServer(spec);
  }, START_MS + 120_000);
  afterAll(() => void server?.child.kill("SIGKILL"));

  toolchain.test(`the ${framework} fixtures are there`, () => expect(fixtures.length).toBeGreaterThan(0));

  describe.each(fixtures.map((f) => ({ graph: f.graph, f })))("$graph", ({ f }) => {
    toolchain.test(`through ${spec.name} with own: the client ends with the framework's state plus its key, its messages, no warning, no RUN_ERROR of ours, fewer state bytes; the middleware said no failure`, async () => {
      const s = server as Running;
      const d = direct.get(f.graph) as Thread;
      for (const [how, url] of Object.entries(s.urls)) {
        const ours = await runThread(url, f);
        expect(againstDirect(f, d, ours), how).toEqual([]);
        console.log(bytesLine(f, `${spec.name}${how === "" ? "" : ` (${how})`}`, d, ours));
        if (snapshotsOften(f)) expect(stateBytes(ours), how).toBeLessThan(stateBytes(d));
      }
      expect(spec.complaints(s.stderr)).toEqual([]);
    }, 120_000);
  });

  // The middleware's log comes on a pipe of its own, after the response: read once more when every run is done.
  toolchain.test(`${spec.name} said no failure over every run`, () => expect(spec.complaints((server as Running).stderr)).toEqual([]));
}
