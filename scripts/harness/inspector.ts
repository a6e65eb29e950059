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
