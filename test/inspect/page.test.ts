import { mkdtempSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { afterAll, afterEach, beforeAll, describe, expect, vi } from "vitest";
import { ROOT } from "../../scripts/harness/fixtures.js";
import { CHROMIUM, GatedAgent, LAYOUT_PROBLEMS, longBaseline, longEvents, openBrowser, outcomeEvents, sse, startInspecting, type Browser, type InspectingProxy } from "../../scripts/harness/inspector.js";
import { SEA, run } from "../../scripts/harness/process.js";
import { toolchain } from "../../scripts/harness/toolchain.js";

/**
 * Issue 31's inspector polish, in Debian's chromium at 1280x800 (the
 * harness's window): nothing clipped and nothing scrolling sideways, measured
 * on the layout with long, realistic text; stream counts that say what they
 * count; and `check --html`'s report, which describes its file and shows its
 * data before the first paint. Issue 32's one vocabulary: the page says
 * `passed`, `mended`, `discarded`, `kept` and no other word for them.
 */

const ARTIFACTS = path.join(ROOT, "test-artifacts/inspector");

const { available, test } = toolchain("chromium (Debian's, for the inspector's page)", [CHROMIUM, "--version"]);

let browser: Browser;
beforeAll(async () => {
  if (available) browser = await openBrowser();
});
afterAll(async () => browser?.close());

let agent: GatedAgent | undefined;
let proxy: InspectingProxy | undefined;
afterEach(async () => {
  proxy?.child.kill("SIGTERM");
  await proxy?.child.waitForExit().catch(() => undefined);
  await agent?.close();
  proxy = agent = undefined;
});

const THREAD = "thread-7d3f9a2e-5b1c-4e8f-9a6d-2c4b8e1f0a37-customer-support-escalations";
const RUN = "run-2026-12-03T09-41-27-512Z-0f8e7d6c-5b4a-3928-1716-0504f3e2d1c0";
/** Words that named an outcome before there was one vocabulary. */
const OLD_WORDS = /not-sent|Not sent:|as-sent|forwarded as sent/;
/** Every badge on the page: an outcome or a kind (§13), alone or counted, or a stream's or the page's status. */
const BADGE = /^((passed|mended|discarded|kept|dropped|ignored|fatal|wiped)( \d+)?|open|complete|broken|live)$/;

/** Runs the agent once, with the client's console.warn (the unknown event, a wiped member) kept out of the test's output. */
async function runQuietly(client: HttpAgent, runId: string): Promise<void> {
  const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
  try {
    await client.runAgent({ runId });
  } finally {
    warn.mockRestore();
  }
}

/** Every event picked in turn, and the diff over the whole stream: what does not fit at each step, and all the page's text. */
async function walk(rows: number, shot: string): Promise<{ problems: string[]; text: string; badges: Set<string> }> {
  const { page } = browser;
  const problems: string[] = [];
  let text = "";
  const badges = new Set<string>();
  const look = async (where: string) => {
    for (const p of await page.evaluate<string[]>(LAYOUT_PROBLEMS)) problems.push(`${where}: ${p}`);
    text += (await page.locator("#app").textContent()) ?? "";
    for (const b of await page.locator("#app .badge").allTextContents()) badges.add(b);
  };
  await look("at load");
  for (let n = 1; n <= rows; n++) {
    await page.locator(`#timeline tr[data-n="${n}"]`).click();
    await look(`event ${n}`);
  }
  await page.locator("#diff-from").selectOption("0");
  await look("the whole stream's diff");
  await page.screenshot({ path: path.join(ARTIFACTS, shot) });
  return { problems, text, badges };
}

describe("the inspector's page at 1280x800, in chromium", () => {
  test("fits long text without clipping or scrolling sideways, live and as a report, in one vocabulary", async () => {
    agent = new GatedAgent((i) => longEvents(i.threadId, i.runId), false);
    proxy = await startInspecting(await agent.listen(), ["--own", "/toolState"]);
    await runQuietly(new HttpAgent({ url: `${proxy.url}/agent`, threadId: THREAD, initialState: longBaseline }), RUN);
    const { page } = browser;
    expect(await page.evaluate<number[]>("[innerWidth, innerHeight]")).toEqual([1280, 800]);
    await page.goto(proxy.inspector);
    await page.locator('#timeline tr[data-n="7"]').waitFor();
    // The data is as long as meant: each outcome's word is on the page, the longest among them.
    expect(await page.locator("#timeline td.outcome").allTextContents()).toEqual(["passed", "mended", "mended", "discarded", "passed", "mended", "passed"]);
    const live = await walk(7, "fit-live.png");
    expect(live.problems).toEqual([]);
    expect(live.text).toContain(THREAD);
    expect(OLD_WORDS.exec(live.text)?.[0]).toBeUndefined();
    expect([...live.badges].filter((b) => !BADGE.test(b))).toEqual([]);
    // The four outcomes, each as a word of its own on some badge.
    expect(["passed", "mended", "discarded", "kept"].filter((w) => ![...live.badges].some((b) => b.split(" ")[0] === w))).toEqual([]);

    const dir = mkdtempSync(path.join(tmpdir(), "agui-fit-"));
    const ev = longEvents(THREAD, RUN);
    const stream = path.join(dir, "support-escalation-run-with-a-long-descriptive-file-name.sse");
    writeFileSync(stream, [...ev.before, ...ev.after].map(sse).join(""));
    writeFileSync(path.join(dir, "state.json"), JSON.stringify(longBaseline));
    const html = path.join(dir, "report.html");
    expect((await run(SEA, ["check", stream, "--state", path.join(dir, "state.json"), "--html", html], "")).code).toBe(1);
    await page.goto(`file://${html}`);
    const report = await walk(7, "fit-report.png");
    expect(report.problems).toEqual([]);
    expect(OLD_WORDS.exec(report.text)?.[0]).toBeUndefined();
    expect([...report.badges].filter((b) => !BADGE.test(b))).toEqual([]);
  });

  test("says what each count counts: a snapshot's wiped members as sent, and the ones the proxy kept", async () => {
    agent = new GatedAgent((i) => longEvents(i.threadId, i.runId), false);
    proxy = await startInspecting(await agent.listen(), ["--own", "/toolState"]);
    await runQuietly(new HttpAgent({ url: `${proxy.url}/agent`, threadId: THREAD, initialState: longBaseline }), RUN);
    const { page } = browser;
    await page.goto(proxy.inspector);
    await page.locator('#timeline tr[data-n="7"]').waitFor();
    const head = page.locator("#stream-head");
    // The same seven findings, counted twice, each count under its own label.
    expect(await head.locator(".group.kinds .label").textContent()).toBe("as sent:");
    expect(await head.locator(".group.kinds .badge").allTextContents()).toEqual(["dropped 5", "wiped 7"]);
    expect(await head.locator(".group.outcomes .label").textContent()).toBe("the proxy:");
    expect(await head.locator(".group.outcomes .badge").allTextContents()).toEqual(["mended 2", "discarded 2", "kept 7", "passed 1"]);
    expect(await head.locator(".kind-wiped").getAttribute("title")).toBe("7 findings about the event as sent: a member the client held that a snapshot replaces or removes");
    expect(await head.locator(".outcome-kept").getAttribute("title")).toBe("7 findings, by what the proxy did: the client's value left standing instead of the snapshot's (--own)");
    const legend = (await page.locator("#legend").textContent()) ?? "";
    expect(legend).toContain("wiped: a member the client held that a snapshot replaces or removes");
    expect(legend).toContain("The proxy, for the same findings,");
    expect(legend).toContain("kept: the client's value left standing instead of the snapshot's (--own)");
    // The stream list says it the same way.
    expect(await page.locator('#streams li[data-stream="1"] .label').allTextContents()).toEqual(["as sent:", "the proxy:"]);
    // Each event: what the client got, in the outcomes' words, and its findings by kind.
    const row = (n: number) => page.locator(`#timeline tr[data-n="${n}"] .badge`).allTextContents();
    expect(await row(2)).toEqual(["mended", "wiped 3"]);
    expect(await row(4)).toEqual(["discarded", "dropped 1"]);
    expect(await page.locator('#timeline tr[data-n="4"] .outcome .badge').getAttribute("title")).toBe("the client got nothing for this event");
    await page.locator('#timeline tr[data-n="6"]').click();
    expect(await page.locator("#event .finding.kind-wiped .outcome-kept").count()).toBe(4);
  });

  test("check --html describes its file, shows times only from the events, no caps, and its data on first paint", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "agui-report-"));
    const { before, after } = outcomeEvents("t-file", "r-file");
    // The AG-UI BaseEvent's own timestamp, on two of the six events.
    const at = Date.UTC(2026, 11, 3, 9, 41, 27, 512);
    const events = [...before, ...after].map((e, i) => (i === 0 ? { ...(e as object), timestamp: at } : i === 3 ? { ...(e as object), timestamp: at + 1250 } : e));
    const file = path.join(dir, "captured-run.sse");
    writeFileSync(file, events.map(sse).join(""));
    const html = path.join(dir, "run.html");
    expect((await run(SEA, ["check", file, "--html", html], "")).code).toBe(1);
    const { page } = browser;
    // Read at DOMContentLoaded, before any timer, frame or request could run; and any "connecting" ever put on the page.
    await page.addInitScript(`
      window.__seen = { connecting: false, requests: 0 };
      new MutationObserver(() => { if (/connecting/i.test(document.getElementById("app")?.textContent ?? "")) window.__seen.connecting = true; }).observe(document, { subtree: true, childList: true, characterData: true });
      document.addEventListener("securitypolicyviolation", () => window.__seen.requests++);
      document.addEventListener("DOMContentLoaded", () => {
        window.__seen.loaded = { rows: document.querySelectorAll("#timeline tbody tr").length, file: document.getElementById("file")?.textContent ?? null, state: document.getElementById("state-json")?.textContent ?? null };
      });
    `);
    await page.goto(`file://${html}`);
    const seen = await page.evaluate<{ connecting: boolean; requests: number; loaded: { rows: number; file: string | null; state: string | null } }>("window.__seen");
    const size = statSync(file).size;
    const described = `${file} · 6 events · ${size < 1024 ? `${size} B` : `${(size / 1024).toFixed(1)} KiB`}`;
    expect(seen.loaded.rows).toBe(6);
    expect(seen.loaded.file).toBe(described);
    expect(JSON.parse(seen.loaded.state ?? "null")).toEqual({ steps: [{ title: "plan", done: true }], plan: "plan" });
    expect(seen.connecting).toBe(false);
    expect(seen.requests).toBe(0);

    // The file, not a proxy: no caps, no time of reading; the events' own times, where they have one.
    const text = (await page.locator("#app").textContent()) ?? "";
    expect(text).not.toMatch(/keeps the last|nothing on disk|\+\d+ ms/);
    expect(await page.locator("#caps").count()).toBe(0);
    expect(await page.locator("#timeline th").allTextContents()).toEqual(["#", "type", "time (UTC)", "size", "findings"]);
    expect(await page.locator("#timeline td.time").allTextContents()).toEqual(["09:41:27.512", "", "", "09:41:28.762", "", ""]);
    expect(await page.locator("#timeline td.time").first().getAttribute("title")).toBe("2026-12-03T09:41:27.512Z");
    await page.screenshot({ path: path.join(ARTIFACTS, "report-first-paint.png") });

    // A file without timestamps has no time column at all.
    writeFileSync(file, [...before, ...after].map(sse).join(""));
    expect((await run(SEA, ["check", file, "--html", html], "")).code).toBe(1);
    await page.goto(`file://${html}`);
    expect(await page.locator("#timeline th").allTextContents()).toEqual(["#", "type", "size", "findings"]);
  });
});
