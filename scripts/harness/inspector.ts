import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { SEA, start, type Sidecar } from "./process.js";

/**
 * `proxy --inspect` for the tests, the bench (B15) and
 * scripts/screenshot-inspector.ts: the proxy with its inspector, an agent
 * whose stream has one op of each outcome, and Debian's chromium driven by
 * playwright-core.
 */

/** What `proxy --inspect` prints when ready: the inspector's line, then the proxy's. */
export const INSPECTING = /^inspector on (http:\/\/\S+\/)\nlistening on (http:\/\/\S+)\n$/;

export interface InspectingProxy {
  child: Sidecar;
  /** The proxy's origin. */
  url: string;
  /** The inspector's page, ending in "/". */
  inspector: string;
}

/** Starts `agui-state proxy --upstream URL --listen 127.0.0.1:0 --inspect 127.0.0.1:0 ARGS`. */
export async function startInspecting(upstream: string, args: readonly string[] = [], env: Record<string, string> = {}): Promise<InspectingProxy> {
  const child = start(SEA, ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--inspect", "127.0.0.1:0", ...args], env);
  await child.until(() => child.stdout.toString("utf8").includes("listening on"), "the proxy's listening line");
  await child.until(() => child.stdout.toString("utf8").endsWith("\n"), "the end of the proxy's listening line");
  const text = child.stdout.toString("utf8");
  const m = INSPECTING.exec(text);
  if (!m) throw new Error(`unexpected stdout from proxy --inspect: ${JSON.stringify(text)}`);
  return { child, inspector: m[1] as string, url: m[2] as string };
}

/**
 * The events of an agent that makes one mistake of each kind the proxy
 * handles, for a client whose state starts as {"theme":"dark"}:
 * event 2 replaces a member that does not exist (mended: sent as an add),
 * event 3 removes one that does not exist (discarded: not sent), event 5's
 * snapshot leaves out "theme", which the client held before the run and no
 * event set (wiped). Keys and values are `label`ed, so a test can put markup in them.
 */
export function outcomeEvents(threadId: string, runId: string, label = "plan"): { before: unknown[]; after: unknown[] } {
  return {
    before: [
      { type: "RUN_STARTED", threadId, runId },
      { type: "STATE_DELTA", delta: [{ op: "replace", path: "/steps", value: [{ title: label, done: false }] }] },
      { type: "STATE_DELTA", delta: [{ op: "remove", path: "/draft" }] },
    ],
    after: [
      { type: "STATE_DELTA", delta: [{ op: "add", path: "/steps/-", value: { title: "fetch", done: true } }] },
      { type: "STATE_SNAPSHOT", snapshot: { steps: [{ title: label, done: true }], [label]: label } },
      { type: "RUN_FINISHED", threadId, runId },
    ],
  };
}

export const sse = (event: unknown): string => `data: ${JSON.stringify(event)}\n\n`;

/**
 * An AG-UI agent on node:http, in this process: POST /agent answers with
 * `events(input)`'s `before` events at once, then holds the stream open until
 * `release()` and sends the `after` ones. Each request has its own gate.
 */
export class GatedAgent {
  private readonly server: http.Server;
  private gates: (() => void)[] = [];
  private waiting: (() => void)[] = [];
  /** Streams whose first part went out and that wait for `release()`. */
  held = 0;

  constructor(events: (input: { threadId: string; runId: string }) => { before: unknown[]; after: unknown[] }, private readonly gated = true) {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const input = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as { threadId?: string; runId?: string };
        const { before, after } = events({ threadId: input.threadId ?? "t", runId: input.runId ?? "r" });
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(before.map(sse).join(""));
        const rest = (): void => void res.end(after.map(sse).join(""));
        if (!this.gated) return rest();
        this.gates.push(rest);
        this.held++;
        for (const w of this.waiting.splice(0)) w();
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Resolves once a stream is held at its gate. */
  whenHeld(): Promise<void> {
    return this.gates.length > 0 ? Promise.resolve() : new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Sends the rest of every held stream. */
  release(): void {
    for (const g of this.gates.splice(0)) g();
  }

  async close(): Promise<void> {
    this.release();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Debian's chromium (scripts/install-toolchains.sh installs it); CHROMIUM overrides the path. */
export const CHROMIUM = process.env["CHROMIUM"] ?? "/usr/bin/chromium";

export interface Browser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/**
 * A headless chromium with a fresh profile (its --user-data-dir, removed on
 * close), nothing running in the background, and one 1280x800 page.
 */
export async function openBrowser(): Promise<Browser> {
  const profile = mkdtempSync(path.join(tmpdir(), "agui-inspector-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * A stream with long, realistic text in every place the page shows one, for
 * layout tests at 1280x800 (run with `--own /toolState`, for a client whose
 * state is `longBaseline`): UUID-style thread and run ids, pointers several
 * levels deep with long keys, a vendor's long event type, and one event of
 * each outcome: mended (a replace of a missing member, an append to a missing
 * array), discarded (removes of missing members, and a delta left with no op),
 * kept (a snapshot leaving out the client's keys) and passed (an unknown type).
 */
export const LONG_KEY = "customerSupportEscalationDraftNotesForTheCurrentConversation";
export const longBaseline = { theme: "dark", [LONG_KEY]: { summary: "The customer asked twice for a refund of the annual plan; escalate to billing.", tags: ["refund", "billing", "priority-high"] }, locale: "en-GB" };
export function longEvents(threadId: string, runId: string): { before: unknown[]; after: unknown[] } {
  const deep = `/toolState/raster-ops~1dataset/layers/0/${LONG_KEY}/annotations`;
  return {
    before: [
      { type: "RUN_STARTED", threadId, runId },
      { type: "STATE_SNAPSHOT", snapshot: { toolState: { "raster-ops/dataset": { layers: [{ [LONG_KEY]: { annotations: [] } }] } } } },
      {
        type: "STATE_DELTA",
        delta: [
          { op: "replace", path: `/toolState/searchResultsForTheQueryTheUserTypedIntoTheSidebar`, value: ["https://example.com/a/very/long/path/to/a/search/result/that/does/not/break/anywhere"] },
          { op: "add", path: `/toolState/pendingToolCallsAwaitingHumanApprovalBeforeExecution/-`, value: { id: "call_9f8e7d6c5b4a39281706f5e4d3c2b1a0" } },
          { op: "remove", path: `/toolState/thisMemberWasNeverAddedByAnyEarlierEventOfTheStream` },
          { op: "add", path: `${deep}/-`, value: { text: "A long annotation that a human wrote about this layer of the dataset." } },
        ],
      },
      { type: "STATE_DELTA", delta: [{ op: "remove", path: `/toolState/staleIntermediateResultFromAnEarlierStepThatWasAlreadyRemoved` }] },
    ],
    after: [
      { type: "VENDOR_SPECIFIC_TELEMETRY_CHECKPOINT_RECORDED_BY_THE_AGENT_FRAMEWORK", value: { step: 3 } },
      { type: "STATE_SNAPSHOT", snapshot: { toolState: { "raster-ops/dataset": { layers: [] } }, theme: "light", unexpectedServerSideKeyThatTheClientNeverHadBeforeThisSnapshot: true } },
      { type: "RUN_FINISHED", threadId, runId },
    ],
  };
}

/**
 * A script for `page.evaluate` (a string: the tests' types are Node's, not
 * the DOM's) that opens every <details> and lists what does not fit the
 * window: the page scrolling sideways, any element whose right edge is past
 * the viewport, and any table cell or scroll container whose content is
 * wider than its box (clipped, or scrolled sideways). [] when all fits.
 */
export const LAYOUT_PROBLEMS = `(() => {
  for (const d of document.querySelectorAll("details")) d.open = true;
  const out = [];
  const se = document.scrollingElement;
  if (se.scrollWidth > se.clientWidth) out.push("the page scrolls sideways: " + se.scrollWidth + " > " + se.clientWidth);
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (typeof el.className === "string" && el.className ? "." + el.className.trim().split(/\\s+/).join(".") : "") + " " + JSON.stringify((el.textContent || "").slice(0, 50));
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > window.innerWidth + 0.5) out.push(name(el) + " ends at x=" + r.right + ", past " + window.innerWidth);
    const boxed = el.tagName === "TD" || el.tagName === "TH" || getComputedStyle(el).overflowX !== "visible";
    if (boxed && el.scrollWidth > el.clientWidth) out.push(name(el) + " holds " + el.scrollWidth + " px in " + el.clientWidth);
  }
  return out;
})()`;
