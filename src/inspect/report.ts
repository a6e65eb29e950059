import type { JsonObject } from "../core/index.js";
import { pageHtml } from "./html.js";
import { Inspector, type StreamRecord } from "./store.js";

/**
 * `check --html FILE` (issue 25): the inspector's page as one static,
 * self-contained file about one captured stream, the same rendering with
 * the data inside it. Its caps are wider than the live inspector's: a report
 * is read once, and a stream read from a file has an end.
 */
export const REPORT_CAPS = { streams: 1, events: 100_000, bytes: 256 * 1024 * 1024 };

export class Report {
  private readonly inspector = new Inspector(REPORT_CAPS);
  readonly stream: StreamRecord;

  constructor(name: string, baseline: JsonObject) {
    this.stream = this.inspector.open({ method: "check", path: name }, baseline);
  }

  /** The page, with the stream's data in it. */
  html(): string {
    return pageHtml({ list: this.inspector.list(), streams: { [this.stream.id]: this.stream.detail() } }).html;
  }
}
