/**
 * Makes docs/inspector.png, docs/cli.md's picture of `proxy --inspect`:
 *   node scripts/ensure-built.mjs && npx tsx scripts/screenshot-inspector.ts [OUT.png]
 * The real HttpAgent runs two runs through the built binary's proxy in front
 * of an agent with a mended, a discarded and a wiping event
 * (scripts/harness/inspector.ts); chromium (CHROMIUM, default Debian's)
 * opens the inspector at 1280x800 and picks the first run's mended delta.
 */
import path from "node:path";
import { HttpAgent } from "@ag-ui/client";
import { ROOT } from "./harness/fixtures.js";
import { GatedAgent, openBrowser, outcomeEvents, startInspecting } from "./harness/inspector.js";

const out = path.resolve(process.argv[2] ?? path.join(ROOT, "docs/inspector.png"));
const agent = new GatedAgent((input) => outcomeEvents(input.threadId, input.runId), false);
const proxy = await startInspecting(await agent.listen());
const browser = await openBrowser();
try {
  const client = new HttpAgent({ url: `${proxy.url}/agent`, threadId: "thread-42", initialState: { theme: "dark" } });
  // The client's console.warn for the wiped member is its own business here.
  await client.runAgent({ runId: "run-1" });
  await client.runAgent({ runId: "run-2" });
  const { page } = browser;
  await page.goto(proxy.inspector);
  await page.locator('#streams li[data-stream="1"]').click();
  await page.locator('#timeline tr[data-n="2"]').click();
  await page.locator("#ops-forwarded").waitFor();
  await page.screenshot({ path: out });
  process.stderr.write(`wrote ${path.relative(process.cwd(), out)}\n`);
} finally {
  await browser.close();
  proxy.child.kill("SIGTERM");
  await proxy.child.waitForExit();
  await agent.close();
}
