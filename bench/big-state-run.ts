/**
 * B25's run: what a LangGraph agent with a large state sends (issue 41's
 * measurement). Its graph state is a ~1 MB `table` of rows and a few small
 * members; after every node the framework sends the whole state as a
 * STATE_SNAPSHOT, a few rows changed each time, with text message events
 * between. The request's RunAgentInput.state is the state before the run plus
 * a member of the client's own, `ui`, which the server never sends: hence the
 * recipe own = the server's members (protocol/README.md §13, --own).
 * The servers (bench/big_state_server.py, bench/go/bigstate,
 * bench/big_state_server.clj) stream these events from a file, one write and
 * flush each; readBigRun is the client.
 */
import http from "node:http";
import { performance } from "node:perf_hooks";

export const SNAPSHOTS = 6;
export const OWN = ["/table", "/status", "/step", "/summary"];

interface BigRun {
  /** The response: SSE blocks, one event each. */
  events: string[];
  /** The request: RunAgentInput with the state before the run and the client's `ui`. */
  body: string;
}

const row = (i: number, step: number) => ({
  id: i,
  sku: `SKU-${String(i).padStart(6, "0")}`,
  name: `row ${i} of the inventory table`,
  qty: (i * 7 + step) % 1000,
  price: Math.round(i * 13.7) / 100,
  region: ["north", "south", "east", "west"][i % 4] as string,
});

/** A state of about `bytes` of JSON; `step` moves a few rows (three per step). */
function graphState(rows: number, step: number): Record<string, unknown> {
  const table = Array.from({ length: rows }, (_, i) => row(i, 0));
  for (let s = 1; s <= step; s++) for (let k = 0; k < 3; k++) table[(s * 997 + k * 31) % rows] = row((s * 997 + k * 31) % rows, s);
  return { table, status: step === 0 ? "idle" : `node ${step}`, step, summary: `after ${step} nodes` };
}

export function bigRun(bytes = 1_000_000): BigRun {
  const rows = Math.ceil(bytes / JSON.stringify(row(0, 0)).length);
  const ev = (e: unknown) => `data: ${JSON.stringify(e)}\n\n`;
  const events = [ev({ type: "RUN_STARTED", threadId: "t", runId: "r" })];
  for (let step = 1; step <= SNAPSHOTS; step++) {
    events.push(ev({ type: "STEP_STARTED", stepName: `node ${step}` }));
    const messageId = `m${step}`;
    events.push(ev({ type: "TEXT_MESSAGE_START", messageId, role: "assistant" }));
    for (let k = 0; k < 20; k++) events.push(ev({ type: "TEXT_MESSAGE_CONTENT", messageId, delta: `token ${k} ` }));
    events.push(ev({ type: "TEXT_MESSAGE_END", messageId }));
    events.push(ev({ type: "STATE_SNAPSHOT", snapshot: graphState(rows, step) }));
    events.push(ev({ type: "STEP_FINISHED", stepName: `node ${step}` }));
  }
  events.push(ev({ type: "RUN_FINISHED", threadId: "t", runId: "r" }));
  const state = { ...graphState(rows, 0), ui: { panel: "table", selected: [1, 2, 3] } };
  const body = JSON.stringify({ threadId: "t", runId: "r", state, messages: [], tools: [], context: [], forwardedProps: {} });
  return { events, body };
}

/** One run: the body posted, the answer read whole and every event's data parsed. The ms it took, and the events. */
export function readBigRun(url: string, body: string): Promise<{ ms: number; events: number; snapshots: number; deltas: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json", accept: "text/event-stream" }, agent: false }, (res) => {
      const decoder = new TextDecoder();
      let rest = "";
      const got = { events: 0, snapshots: 0, deltas: 0 };
      const take = (text: string): void => {
        const blocks = (rest + text).split("\n\n");
        rest = blocks.pop() ?? "";
        for (const block of blocks) {
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (data === "") continue; // the opening id block (protocol/README.md §16)
          const type = (JSON.parse(data) as { type: string }).type;
          got.events++;
          if (type === "STATE_SNAPSHOT") got.snapshots++;
          if (type === "STATE_DELTA") got.deltas++;
        }
      };
      res.on("data", (chunk: Buffer) => take(decoder.decode(chunk, { stream: true })));
      res.on("end", () => {
        take(decoder.decode() + "\n\n");
        resolve({ ms: performance.now() - t0, ...got });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}
