import { describe, expect, it } from "vitest";
import { defaultResume, LOADED_PIPELINE } from "../../scripts/harness/paired.js";
import type { CallResult } from "../../src/protocol/errors.js";
import { PAGE_BYTES } from "../../src/resume/pages.js";
import { StreamService } from "../../src/service/stream-service.js";

/**
 * Back-pressure in the stream methods (issue 38, protocol/README.md §16): readRejoin hands over one
 * page a call, read from the log only when the last was taken, and the page it holds counts against
 * the log's cap until it is handed over. So a middleware whose client reads slowly, and asks only
 * once its client took the last page, holds the sidecar to a page however long the run.
 */
const value = <T>(r: CallResult<T>): T => {
  if (!r.ok) throw new Error(`failed: ${JSON.stringify(r.error)}`);
  return r.value;
};
const sse = (e: object): string => `data: ${JSON.stringify(e)}\n\n`;

describe("readRejoin's pages", () => {
  it("a 5 MB run is handed over a page a call, each at most a page and one event, every byte once, in order", async () => {
    const resume = defaultResume();
    const svc = new StreamService({ pipeline: LOADED_PIPELINE, resume });
    const { streamId, opening } = value(svc.openStream({ state: {}, resume: { threadId: "t1", path: "/agent", requestHeaders: [] } }));
    const event = sse({ type: "TEXT_MESSAGE_CONTENT", messageId: "m", delta: "é".repeat(2500) });
    let sent = value(svc.fixStream({ streamId, text: sse({ type: "RUN_STARTED", threadId: "t1", runId: "r" }) + sse({ type: "TEXT_MESSAGE_START", messageId: "m", role: "assistant" }) })).text;
    for (let i = 0; i < 1000; i++) sent += value(svc.fixStream({ streamId, text: event })).text;
    sent += value(svc.closeStream({ streamId })).text;
    expect(sent.length).toBeGreaterThan(2_500_000);
    const held = resume.log.stats().bytes;
    const { readId } = value(await svc.rejoins.rejoinStream({ request: { method: "POST", path: "/agent", headers: [["Last-Event-ID", (opening as string).slice(4, -2)]], body: '{"threadId":"t1"}' } }));
    let got = "";
    let pages = 0;
    for (;;) {
      const r = value(await svc.rejoins.readRejoin({ readId }));
      // One page ready at most: the log's count is its own bytes and that page.
      expect(resume.log.stats().bytes - held).toBeLessThanOrEqual(PAGE_BYTES + Buffer.byteLength(event));
      expect(Buffer.byteLength(r.text)).toBeLessThanOrEqual(PAGE_BYTES + Buffer.byteLength(event));
      got += r.text;
      if (r.text !== "") pages++;
      if (r.done) {
        expect(r.end).toBe("finished");
        break;
      }
    }
    expect(got).toBe(sent);
    expect(pages).toBeGreaterThan(10);
    // Everything handed over: nothing held for the read any more.
    expect(resume.log.stats().bytes).toBe(held);
  });
});
