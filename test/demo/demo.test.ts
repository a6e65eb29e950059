import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { NOTHING_MOVED, runDemo } from "../../scripts/demo/two-runs.js";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { BINARY, childEnv, type Command } from "../../scripts/harness/process.js";

/**
 * `npm run demo` prints the wire (docs/contributing.md): every AG-UI event it
 * forwards, one compact JSON per line after the call that returned it, in the
 * order it forwards them, then its checks (issue 22 §6).
 */

const CALL = /^(run [12]) {2}(\w+)\s+(.*)$/;

/** The demo's call lines: the run, the method, and the event (or NOTHING_MOVED) printed after them. */
function calls(lines: readonly string[]): { run: string; method: string; rest: string }[] {
  return lines.flatMap((l) => {
    const m = CALL.exec(l);
    return m ? [{ run: m[1] ?? "", method: m[2] ?? "", rest: m[3] ?? "" }] : [];
  });
}

const printedEvents = (lines: readonly string[]): unknown[] =>
  calls(lines).filter((c) => c.rest !== NOTHING_MOVED).map((c) => JSON.parse(c.rest) as unknown);

describe("npm run demo", () => {
  it("plays its two runs against dist/agui-state, prints each event as JSON and passes its checks", () => {
    // What `npm run demo` runs after ensure-built: the script under tsx, as a separate process.
    const demo = spawnSync(path.join(ROOT, "node_modules/.bin/tsx"), ["scripts/demo.ts"], { cwd: ROOT, env: childEnv(), timeout: 60_000 });
    const r = { status: demo.status, stdout: demo.stdout.toString("utf8"), stderr: demo.stderr.toString("utf8") };
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split("\n");
    const events = printedEvents(lines) as { type: string; delta?: unknown; patch?: unknown }[];
    // Eleven calls, ten events; the one call that moved nothing says so instead of printing an event.
    expect(calls(lines)).toHaveLength(11);
    expect(calls(lines).filter((c) => c.rest === NOTHING_MOVED)).toEqual([{ run: "run 1", method: "diffToolState", rest: NOTHING_MOVED }]);
    expect(events.map((e) => e.type)).toEqual([
      "STATE_DELTA", "STATE_DELTA", "STATE_DELTA", "STATE_DELTA",
      "ACTIVITY_SNAPSHOT", "ACTIVITY_DELTA", "ACTIVITY_DELTA", "ACTIVITY_DELTA",
      "STATE_DELTA", "ACTIVITY_DELTA",
    ]);
    // A key with "/" travels escaped; the second run opens with the whole namespace.
    expect(events[1]?.delta).toContainEqual({ op: "add", path: "/toolState/raster-ops~1dataset", value: "era5" });
    expect(events[8]?.delta).toEqual([{ op: "add", path: "/toolState", value: { "raster-ops/dataset": "era5", notes: ["zoomed to bounds"] } }]);
    expect(events[9]).toMatchObject({ type: "ACTIVITY_DELTA", messageId: "plan-1", activityType: "plan-done" });
    expect(lines.slice(-5)).toEqual([
      `client's own keys after the run: selectedLayer="era5" ui={"panel":"open"}: true`,
      "applied deltas == getState: true",
      "the same through fast-json-patch, as @ag-ui/client applies them: true",
      `the client's plan == getActivity (plan-done, {"title":"map the storm","steps":[{"title":"load era5","done":true},{"title":"draw bounds","done":true}],"log":["era5 loaded"]}): true`,
      "the sidecar exited 0 when its stdin closed: true",
    ]);
  });

  it("prints exactly the events the sidecar wrote to its stdout, in the order it wrote them", async () => {
    // The real binary behind a tee, so the test reads the bytes on the pipe, not the demo's own record.
    const dir = mkdtempSync(path.join(tmpdir(), "agui-demo-"));
    try {
      const log = path.join(dir, "stdout.ndjson");
      const tee: Command = { name: "dist/agui-state | tee", file: "/bin/bash", args: ["-c", 'set -o pipefail; "$0" | tee "$1"', BINARY, log] };
      const lines: string[] = [];
      expect(await runDemo((l) => lines.push(l), tee)).toBe(0);

      const responses = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { result?: { events?: unknown[] } });
      const withEvents = responses.filter((r) => Array.isArray(r.result?.events));
      const sent = withEvents.flatMap((r) => r.result?.events ?? []);
      expect(sent.length).toBeGreaterThanOrEqual(10);
      expect(printedEvents(lines)).toEqual(sent);
      // One printed call per response that carries events, an empty one printed as such.
      expect(calls(lines).map((c) => c.rest === NOTHING_MOVED)).toEqual(
        withEvents.flatMap((r) => (r.result?.events?.length ? r.result.events.map(() => false) : [true])),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
