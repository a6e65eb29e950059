import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, expect } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { anyId } from "../../scripts/harness/sse-ids.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { allBlocks, type Block, type Step, steps } from "./blocks.js";
import { freshClone, readerEnv } from "./describe.js";
import { ScenarioShell } from "./scenario.js";

/**
 * The README's Clojure path for tools.deps users: its `deps.edn` coordinate,
 * as shown, in a project beside a fresh clone of the committed HEAD (where the
 * coordinate's `../agui-state` finds the clone, as the Go module's `replace`
 * does), resolved as tools.deps resolves `:local/root` and `:mvn/version`
 * (test/readme/resolve-deps.clj) against Debian's Maven repository, offline.
 * The README's `app.clj` then runs on that classpath, plus the Ring jars a
 * Ring app has of its own, and answers the README's request with the README's
 * output (its sidecar is this checkout's dist/agui-state: the `clojure`
 * scenario, clone-clojure.test.ts, builds one in its own clone as shown). The Clojure CLI (tools.deps) is in no Debian or npm package and
 * fetches over the network, so the block stays `show` and its resolution is
 * this test's.
 */
const REPO = "/usr/share/maven-repo";
const RING = ["ring-core", "ring-jetty-adapter"].map((j) => `/usr/share/java/${j}.jar`);
const tools = toolchain("Clojure, Debian's Maven repository of its libraries (libdata-json-clojure), Ring and its Jetty adapter, and curl", [
  "bash", "-c", `command -v curl && command -v clojure && test -d ${REPO}/org/clojure/data.json && ls ${RING.join(" ")}`,
]);
/** The JVM's start, the resolution and Jetty's on a loaded machine: a hang guard, not a figure under test. */
const GUARD_MS = 300_000;

let work: string | undefined;
let shell: ScenarioShell | undefined;
afterEach(() => {
  shell?.close();
  if (work) rmSync(work, { recursive: true, force: true });
  shell = work = undefined;
});

tools.test("the deps.edn coordinate resolves, offline, to the client's sources and data.json, and the README's app runs on it as shown", async () => {
  work = mkdtempSync(path.join(tmpdir(), "agui-readme-deps-"));
  const clone = freshClone(work);
  const blocks = allBlocks(clone);
  const deps = blocks.filter((b) => b.file === "README.md" && b.lang === "clojure" && b.body.trimStart().startsWith("{:deps"));
  expect(deps.map((b) => b.marker[0]), "one deps.edn coordinate, shown").toEqual(["show"]);
  const clojure = steps(blocks, "clojure");
  const app = clojure.find((s) => s.kind === "file" && s.args[0] === "app.clj");
  const serve = clojure.findIndex((s) => s.kind === "serve");
  const output = clojure[serve + 1];
  expect(app && serve >= 0 && output?.kind === "output", "the clojure scenario's app.clj, serve and output blocks").toBe(true);

  const serveStep = clojure[serve] as Step;
  const project = path.join(work, "agent");
  mkdirSync(project);
  writeFileSync(path.join(project, "deps.edn"), (deps[0] as Block).body);

  const resolved = spawnSync("clojure", [path.join(ROOT, "test/readme/resolve-deps.clj"), path.join(project, "deps.edn"), REPO], {
    encoding: "utf8",
    timeout: GUARD_MS,
    env: readerEnv(work),
  });
  expect(resolved.status, `${resolved.stdout}\n${resolved.stderr}`).toBe(0);
  const classpath = resolved.stdout.trim().split(":");
  expect(classpath, "the client's sources, through :local/root").toContain(realpathSync(path.join(clone, "clients/clojure/src")));
  expect(classpath.filter((p) => /\/data\.json-[^/]+\.jar$/.test(p)), "org.clojure/data.json, which the coordinate brings").toHaveLength(1);

  // The README's serve block, its server started on the resolved classpath rather than on the -cp it names.
  const lines = serveStep.block.body.replace(/\n$/, "").split("\n");
  const requests = lines.slice(lines.map((l) => l.trimEnd().endsWith("&")).lastIndexOf(true) + 1);
  const env = { ...readerEnv(work), RESOLVED_CLASSPATH: [...classpath, ...RING].join(":"), AGUI_STATE_BIN: path.join(ROOT, "dist/agui-state") };
  shell = new ScenarioShell(work, project, env, GUARD_MS);
  await shell.choosePorts([serveStep]);
  shell.file("app.clj", (app as Step).block.body);
  const r = await shell.serve(['clojure -cp "$RESOLVED_CLASSPATH" app.clj &', ...requests].join("\n") + "\n", serveStep.args);
  expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  expect(anyId(r.stdout.replace(/\n+$/, "\n"))).toBe(anyId((output as Step).block.body.replace(/\n+$/, "\n")));
}, GUARD_MS * 2);
