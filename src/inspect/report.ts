import type { JsonObject } from "../core/index.js";
import type { Report as ReportData } from "./api.js";
import { pageHtml } from "./html.js";
import { Inspector, type StreamRecord } from "./store.js";

/**
 * `check --html FILE` (issue 25): the inspector's page as one static,
 * self-contained file about one captured stream, the same rendering with
 * the data inside it. Its caps are wider than the live inspector's: a report
 * is read once, and a stream read from a file has an end. It describes the
 * file (its name, its size, its events), not a proxy: no caps on the page,
 * and no time of reading on its events (issue 31).
 */
export const REPORT_CAPS = { streams: 1, events: 100_000, bytes: 256 * 1024 * 1024 };

export class Report {
  private readonly inspector = new Inspector(REPORT_CAPS, false);
  readonly stream: StreamRecord;
  /** The input's size so far, in bytes, as read. */
  private bytes = 0;

  constructor(
    private readonly name: string,
    baseline: JsonObject,
  ) {
    this.stream = this.inspector.open({ method: "check", path: name }, baseline);
  }

  /** A chunk of the input, as check reads it: counted for the file's size. */
  read(chunk: Uint8Array | string): void {
    this.bytes += typeof chunk === "string" ? Buffer.byteLength(chunk) : chunk.byteLength;
  }

  /** The page, with the stream's data in it. */
  html(): string {
    const data: ReportData<unknown> = { file: { name: this.name, bytes: this.bytes }, list: this.inspector.list(), streams: { [this.stream.id]: this.stream.detail() } };
    return pageHtml(data).html;
  }
}
