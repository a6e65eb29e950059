import { mkdtempSync, readFileSync, readdirSync, readlinkSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterAll, beforeAll, describe, expect, vi } from "vitest";
import type { JsonObject } from "../../src/core/index.js";
import { clientApply, runCollecting } from "../../scripts/harness/agui-client.js";
import { BINARY, SEA, run } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";
import { OPENING, withoutIds } from "../../scripts/harness/sse-ids.js";
import { request, runInput } from "../proxy/http-client.js";
import { JARS, startJetty, stopJetties, type Jetty } from "./jetty.js";

/**
 * Issue 24 §4 and §6: agui-state.ring/wrap-agui-state in a real Jetty server
 * (clients/clojure/test/agui_state/ring_agent.clj, one JVM for every case here),
 * in front of an agent that sends `add /todos/-` before /todos exists, an
 * unescaped key, and a STATE_SNAPSHOT after every write. The real HttpAgent
 * runs through it. The witness is `agui-state fix` with the middleware's flags
 * (`--own /toolState --join-keys`, `--state` = the request's RunAgentInput.state)
 * on the bytes the same agent answers without the middleware (/raw), replayed
 * through @ag-ui/client's own defaultApplyEvents. The middleware's sidecar is
 * found as a deployment finds it, from AGUI_STATE_BIN.
 */
const { available, test } = toolchain("Clojure + Ring + Jetty (clojure, libdata-json-clojure, libring-core-clojure, libring-jetty-adapter-clojure)", [
  "bash",
  "-c",
  `command -v clojure && ${JARS.map((j) => `test -f ${j}`).join(" && ")}`,
]);

const CLIENT_KEYS = { selectedLayer: "era5", ui: { panel: "layers", zoom: 3 } };
const FLAGS = ["--own", "/toolState", "--join-keys"];
/** A hang guard for the JVM's start, never an assertion. */
const START_MS = 110_000;

let server: Jetty | undefined;
let url = "";
let tmp = "";
const stderr = (): string => server?.stderr() ?? "";

beforeAll(async () => {
  // Without the toolchain the tests are skipped (toolchain() said so loudly), or fail under CI.
  if (!available) return;
  tmp = mkdtempSync(path.join(tmpdir(), "agui-ring-"));
  server = await startJetty("agui-state.ring-agent", { startMs: START_MS });
  url = server.url;
}, START_MS + 5_000);

afterAll(() => {
  stopJetties();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

/** The events of an SSE text as `fix` writes it (LF, one data line an event). */
const sseEvents = (text: string): unknown[] =>
  text
    .split("\n\n")
    .filter((b) => b.trim() !== "")
    .map((b) => JSON.parse(b.replace(/^data: /, "")) as unknown);

/** What `agui-state fix FLAGS --state STATE` writes for what the agent answers, unwrapped, to this request. */
async function fixed(state: JsonObject, runId: string): Promise<string> {
  const raw = await request(`${url}/raw`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput(state, runId) });
  expect(raw.status).toBe(200);
  const stateFile = path.join(tmp, `${runId}.json`);
  writeFileSync(stateFile, JSON.stringify(state));
  const r = await run(SEA, ["fix", "--state", stateFile, ...FLAGS], raw.body);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.toString("utf8");
}

/** The processes below `pid` (the clojure launcher may run java as its child), from /proc. */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // /proc/PID/stat: "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // The process ended while we looked.
    }
  }
  const below: number[] = [];
  const walk = (p: number): void => {
    for (const [child, ppid] of parent) {
      if (ppid !== p) continue;
      below.push(child);
      walk(child);
    }
  };
  walk(pid);
  return below;
}

/** The executable a process runs, or "" if it is gone. */
const exe = (pid: number): string => {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return "";
  }
};

const sidecarPid = async (): Promise<number> => Number((await request(`${url}/sidecar-pid`)).body.toString("utf8"));

describe("HttpAgent through wrap-agui-state in Jetty, in front of an agent with three field mistakes", () => {
  test("the sidecar runs as soon as the app is made, before any request (issue 31: the first stream does not wait for it)", () => {
    // No request has been made yet: the server only said it listens, after its sidecar component started.
    const sidecars = descendants(server?.child.pid ?? 0).filter((p) => exe(p) === realpathSync(BINARY));
    expect(sidecars).toHaveLength(1);
  });

  test("ends on the state of `fix` on the agent's own bytes, with no warning, the client's keys kept", async () => {
    const agent = new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    for (const runId of ["r1", "r2"]) {
      const before = structuredClone(agent.state) as JsonObject;
      expect(await runCollecting(agent, runId)).toEqual([]);
      const text = await fixed(before, runId);
      expect(agent.state).toEqual(await clientApply(before, sseEvents(text)));
      expect(agent.state).toMatchObject(CLIENT_KEYS);
      // The same request, read as bytes: exactly what `fix` writes (protocol/README.md §14), with an
      // id first in every event, and the opening id block before them, since resume is on by default (§16).
      const answer = await request(`${url}/agent`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput(before, runId) });
      const body = answer.body.toString("utf8");
      expect(body).toMatch(OPENING);
      expect(body.replace(OPENING, "").split("\n\n").filter((b) => b !== "").every((b) => /^id: \S+\n/.test(b))).toBe(true);
      expect(withoutIds(body)).toBe(text);
      expect(answer.headers["content-type"]).toMatch(/^text\/event-stream/);
    }
    // The unescaped key was read as one key, the snapshots touched /toolState only, /todos was created.
    expect(agent.state).toEqual({ ...CLIENT_KEYS, todos: ["milk", "milk"], toolState: { search: { query: "café ☕", run: "r2" }, "raster-ops/dataset": "era5" } });
  });

  test("the same server without the middleware warns and wipes the client's keys (the negative control)", async () => {
    const agent = new HttpAgent({ url: `${url}/raw`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    const said = await runCollecting(agent, "n1");
    expect(said.length).toBeGreaterThan(0);
    expect(said.join("\n")).toMatch(/todos|raster-ops/);
    expect(agent.state).not.toHaveProperty("selectedLayer");
    expect(agent.state).not.toHaveProperty("ui");
  });

  test("kill -9 of the sidecar under two streams: it is restarted once, the rest of both is repaired, no warning, the client's keys kept, the next run repaired", async () => {
    const runIds = ["k1", "k2"];
    const agents = runIds.map(() => new HttpAgent({ url: `${url}/agent-gated`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) }));
    const said: string[] = [];
    const warn = vi.spyOn(console, "warn").mockImplementation((...a: unknown[]) => void said.push(String(a[0])));
    const error = vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => void said.push(String(a[0])));
    let killed: number;
    try {
      const running = agents.map((agent, i) => agent.runAgent({ runId: runIds[i] as string }));
      // Both streams stop after their first snapshot, which the middleware has repaired by then (each write is flushed through fixStream).
      const reached = await request(`${url}/gate/reached?n=2`);
      expect(reached.status).toBe(200);
      killed = Number(reached.body.toString("utf8"));
      expect(killed).toBeGreaterThan(0);
      process.kill(killed, "SIGKILL");
      expect((await request(`${url}/gate/open`, { method: "POST" })).status).toBe(200);
      await Promise.all(running);
    } finally {
      warn.mockRestore();
      error.mockRestore();
    }
    // What came after the kill was repaired too: the unescaped key read as one key, the last snapshot a delta on /toolState.
    expect(said).toEqual([]);
    for (const [i, agent] of agents.entries()) {
      const runId = runIds[i] as string;
      expect(agent.state).toMatchObject(CLIENT_KEYS);
      expect(agent.state).toEqual(await clientApply(structuredClone(CLIENT_KEYS), sseEvents(await fixed(structuredClone(CLIENT_KEYS), runId))));
    }
    // One new sidecar for both streams, each resumed on it from a replay, and said so.
    const pid = await sidecarPid();
    expect(pid).toBeGreaterThan(0);
    expect(pid).not.toBe(killed);
    const restarts = [...stderr().matchAll(/agui-state\.ring: the sidecar \(pid (\d+)\) was lost during fixStream on stream s\d+ \(exit status 137\); restarted \(pid (\d+)\), stream s\d+ resumes with its mirror rebuilt from the (\d+) bytes answered for/g)];
    expect(restarts.map((m) => [Number(m[1]), Number(m[2])])).toEqual([
      [killed, pid],
      [killed, pid],
    ]);
    for (const m of restarts) expect(Number(m[3])).toBeGreaterThan(0);
    expect(stderr()).not.toMatch(/unrepaired/);
    // Whatever the middleware changed is logged by outcome: the mended key, the client's keys kept.
    expect(stderr()).toMatch(/agui-state\.ring: stream s\d+: 1 mended\n/);
    expect(stderr()).toMatch(/agui-state\.ring: stream s\d+: 3 kept\n/);

    // The next run on the same client: repaired by the new sidecar, from the state the kill left.
    const agent = agents[0] as HttpAgent;
    const before = structuredClone(agent.state) as JsonObject;
    const next = new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: before });
    expect(await runCollecting(next, "k3")).toEqual([]);
    expect(next.state).toEqual(await clientApply(before, sseEvents(await fixed(before, "k3"))));
    expect(next.state).toMatchObject(CLIENT_KEYS);
    expect(await sidecarPid()).toBe(pid);
  });

  test("SIGSTOP of the sidecar mid-stream: the call gives up after 5000 ms, the sidecar is ended, every event of the app arrives in order, and the next stream is repaired by a new sidecar", async () => {
    const stopped = await sidecarPid();
    expect(stopped).toBeGreaterThan(0);
    const res = await fetch(`${url}/agent-paced`, { method: "POST", headers: { "content-type": "application/json" }, body: runInput({}, "p1") });
    expect(res.status).toBe(200);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    let sent = false;
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        text += decoder.decode(chunk.value, { stream: true });
        // Stopped mid-stream, after 10 of the app's 100 events (one every 20 ms) came repaired.
        if (!sent && (text.match(/^data: /gm) ?? []).length >= 10) {
          process.kill(stopped, "SIGSTOP");
          sent = true;
        }
      }
    } finally {
      // The middleware has ended it by now; were it still there, it must not stay stopped.
      try {
        process.kill(stopped, "SIGCONT");
      } catch {
        // Gone, as it should be.
      }
    }
    expect(sent).toBe(true);
    // Every event the app wrote reached the client, in order, whole: the repaired ones with ids, the rest as written.
    const events = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1] as string) as { type: string; delta?: string });
    expect(events).toHaveLength(100);
    expect(events.map((e) => e.type)).toEqual(["RUN_STARTED", "TEXT_MESSAGE_START", ...Array<string>(96).fill("TEXT_MESSAGE_CONTENT"), "TEXT_MESSAGE_END", "RUN_FINISHED"]);
    expect(events.map((e) => e.delta ?? "").join("")).toBe(Array.from({ length: 96 }, (_, i) => `${i} `).join(""));
    // One line names the limit and the sidecar it ended.
    const lines = [...stderr().matchAll(/agui-state\.ring: the sidecar did not answer (\w+) within (\d+) ms; it was ended \(pid (\d+)\), the rest of stream s\d+ goes out unrepaired, and the next stream starts a new sidecar\n/g)];
    expect(lines.map((m) => [m[1], Number(m[2]), Number(m[3])])).toEqual([["fixStream", 5000, stopped]]);
    expect(exe(stopped)).toBe("");

    // The next stream: a new sidecar, and repaired again.
    const agent = new HttpAgent({ url: `${url}/agent`, threadId: "t1", initialState: structuredClone(CLIENT_KEYS) });
    expect(await runCollecting(agent, "p2")).toEqual([]);
    expect(agent.state).toEqual(await clientApply(structuredClone(CLIENT_KEYS), sseEvents(await fixed(structuredClone(CLIENT_KEYS), "p2"))));
    const pid = await sidecarPid();
    expect(pid).toBeGreaterThan(0);
    expect(pid).not.toBe(stopped);
  });
});
