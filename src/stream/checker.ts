import type { JsonObject } from "../core/json.js";
import { ClientModel } from "./client-model.js";
import { EventReader, type StreamItem } from "./events.js";
import type { Finding } from "./findings.js";
import { PATCH_KEY } from "./admit.js";

/** The summary of a check: events read, of them deltas, and how many events had a finding of each kind. */
export interface Summary {
  events: number;
  deltas: number;
  dropped: number;
  ignored: number;
  fatal: number;
}

/**
 * `agui-state check` as a stream consumer: bytes in, the findings of every
 * event they complete out, replayed as @ag-ui/client 1.0.0 would
 * (client-model.ts) from `state` (default {}).
 */
export class StreamChecker {
  private readonly reader = new EventReader();
  readonly model: ClientModel;
  readonly summary: Summary = { events: 0, deltas: 0, dropped: 0, ignored: 0, fatal: 0 };

  constructor(state: JsonObject = {}) {
    this.model = new ClientModel(state);
  }

  push(chunk: Uint8Array | string): Finding[] {
    return this.read(this.reader.push(chunk));
  }

  end(): Finding[] {
    return this.read(this.reader.end());
  }

  private read(items: StreamItem[]): Finding[] {
    const out: Finding[] = [];
    for (const item of items) {
      if (item.data === undefined) continue;
      const n = ++this.summary.events;
      const at = { event: n, line: item.line, type: "" };
      const findings = this.model.feed(item.data, at);
      if (PATCH_KEY[at.type] !== undefined) this.summary.deltas++;
      for (const kind of new Set(findings.map((f) => f.kind))) this.summary[kind]++;
      out.push(...findings);
    }
    return out;
  }
}
