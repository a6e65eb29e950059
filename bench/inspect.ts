/**
 * Issue 25's figures for `proxy --inspect`.
 *
 * B15: events per second through `proxy --inspect` while the inspector's
 * page is open in chromium and following the stream (its live feed, and the
 * new events of the stream it shows, fetched as they come), against `proxy`
 * without --inspect, over B9's stream of 100,000 small STATE_DELTA events.
 * Both proxies run at once, on the same CPU; the rounds alternate.
 *
 * B15m: the peak resident memory of `proxy --inspect`, at its default caps,
 * after 1,000 streams of 1,000 events, against the same proxy without it plus
 * what the caps allow (streams × bytes per stream). Medians of alternating
 * runs: the plain proxy's own peak moves by several MiB from run to run.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { statusKiB } from "../scripts/harness/os.js";
import { SEA, Sidecar } from "../scripts/harness/process.js";
import { INSPECTING, openBrowser } from "../scripts/harness/inspector.js";
import { DEFAULT_CAPS } from "../src/inspect/store.js";
import { alternate } from "./lib.js";
import { makeStream, pinned, readRun } from "./proxy.js";
import { f, note, range, type Row } from "./report.js";

/** An upstream that answers every request with `stream`, in 16 KiB slices. */
async function upstreamOf(stream: Buffer): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let at = 0;
      const more = (): void => {
        while (at < stream.length) if (!res.write(stream.subarray(at, (at += 16 * 1024)))) return void res.once("drain", more);
        res.end();
      };
      more();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Starts the binary's proxy, with `args` (--inspect ones or none); resolves with its origin and the inspector's page, if any. */
async function proxyWith(upstream: string, args: string[]): Promise<{ child: Sidecar; url: string; inspector: string | undefined }> {
  const child = new Sidecar({ command: pinned(SEA), args: ["proxy", "--upstream", upstream, "--listen", "127.0.0.1:0", "--log-level", "warn", ...args], stderr: "ignore" });
  await child.until(() => /listening on \S+\n/.test(child.stdout.toString("utf8")), "the proxy's listening line", 60_000);
  const text = child.stdout.toString("utf8");
  const m = INSPECTING.exec(text);
  return { child, url: m?.[2] ?? /listening on (\S+)/.exec(text)?.[1] ?? "", inspector: m?.[1] };
}

async function stop(child: Sidecar): Promise<void> {
  child.kill("SIGTERM");
  await child.waitForExit(60_000).catch(() => child.kill());
}

export async function inspectThroughput(row: (r: Row) => void, quick: boolean): Promise<void> {
  const stream = makeStream();
  const events = stream.toString("utf8").split("\n\n").length - 1;
  const upstream = await upstreamOf(stream);
  const plain = await proxyWith(upstream.url, []);
  const inspecting = await proxyWith(upstream.url, ["--inspect", "127.0.0.1:0"]);
  const browser = await openBrowser();
  try {
    await browser.page.goto(inspecting.inspector as string);
    await browser.page.locator("header .live-live").waitFor();
    const check = await readRun(inspecting.url);
    await readRun(plain.url);
    if (check.events !== events) throw new Error(`B15: the proxy passed ${check.events} events of ${events}`);
    // The page follows: it shows the newest stream, up to its latest event.
    await browser.page.locator(`#timeline tr[data-n="${events}"]`).waitFor({ timeout: 60_000 });
    const [ours, ref] = await alternate(
      quick ? 3 : 9,
      async () => (await readRun(inspecting.url)).perSecond,
      async () => (await readRun(plain.url)).perSecond,
    );
    const ratio = ours.median / ref.median;
    row({
      id: "B15",
      what: `events/s through \`proxy --inspect\` with the page open and following, one stream of ${f(events - 2, 0)} small STATE_DELTA events`,
      ours: range(ours, 0),
      reference: `proxy without --inspect: ${range(ref, 0)}`,
      ratio: f(ratio, 2),
      target: "≥ 0.8",
      met: ratio >= 0.8,
    });
  } finally {
    await browser.close();
    await stop(plain.child);
    await stop(inspecting.child);
    await upstream.close();
  }
}

/** 1,000 events: RUN_STARTED, 998 deltas on a small state, RUN_FINISHED. */
function thousandEvents(): Buffer {
  const parts = ['data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'];
  for (let i = 0; i < 998; i++) parts.push(`data: {"type":"STATE_DELTA","delta":[{"op":"replace","path":"/counter","value":${i}},{"op":"add","path":"/note","value":"step ${i % 10}"}]}\n\n`);
  parts.push('data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n');
  return Buffer.from(parts.join(""), "utf8");
}

export async function inspectMemory(row: (r: Row) => void, quick: boolean): Promise<void> {
  const streams = quick ? 200 : 1000;
  // The defaults: what a user who sets no cap gets.
  const caps = DEFAULT_CAPS;
  const upstream = await upstreamOf(thousandEvents());
  const peakAfter = async (args: string[]): Promise<number> => {
    const p = await proxyWith(upstream.url, args);
    try {
      // Four at a time, as a few tabs would.
      for (let i = 0; i < streams; i += 4) await Promise.all([0, 1, 2, 3].map(() => readRun(p.url)));
      return statusKiB(p.child.pid, "VmHWM") * 1024;
    } finally {
      await stop(p.child);
    }
  };
  try {
    const inspect = ["--inspect", "127.0.0.1:0"];
    // The plain proxy's own peak moves by several MiB from run to run: medians of alternating runs.
    const [withIt, without] = await alternate(quick ? 2 : 3, () => peakAfter(inspect), () => peakAfter([]));
    const plain = without.median;
    const inspecting = withIt.median;
    const allowed = caps.streams * caps.bytes;
    const MiB = 1024 * 1024;
    row({
      id: "B15m",
      what: `peak resident memory of \`proxy --inspect\` after ${f(streams, 0)} streams of 1,000 events (default caps: ${caps.streams} streams, ${f(caps.events, 0)} events, ${caps.bytes / 1024 / 1024} MiB each)`,
      ours: `${f(inspecting / MiB, 1)} MiB`,
      reference: `proxy without --inspect ${f(plain / MiB, 1)} MiB + caps ${f(allowed / MiB, 1)} MiB`,
      ratio: f(inspecting / (plain + allowed), 2),
      target: "≤ 1",
      met: inspecting <= plain + allowed,
    });
    note(`B15m: the inspector's own peak above the plain proxy's: ${f((inspecting - plain) / MiB, 1)} MiB for caps of ${f(allowed / MiB, 1)} MiB.`);
  } finally {
    await upstream.close();
  }
}
