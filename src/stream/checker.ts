import type { JsonObject } from "../core/json.js";
import { ClientModel } from "./client-model.js";
import { CLIENT_SSE_LIMIT, EventReader, type StreamItem } from "./events.js";
import { finding, type Finding } from "./findings.js";
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
  // The client's own reading of SSE: check must see the events the client sees.
  private readonly reader = new EventReader("client");
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
      if (item.overflow) {
        out.push(...this.overflow(item));
        continue;
      }
      if (item.data === undefined) continue;
      const n = ++this.summary.events;
      const at = { event: n, line: item.line, type: "" };
      const findings = this.model.feed(item.data, at).map((f) => (f.code === "INVALID_JSON" && item.raw.includes("\r") ? lineEnds(f) : f));
      if (PATCH_KEY[at.type] !== undefined) this.summary.deltas++;
      for (const kind of new Set(findings.map((f) => f.kind))) this.summary[kind]++;
      out.push(...findings);
    }
    return out;
  }

  /** The client's SSE parser gave up: its run fails here, counted as an event of its own. */
  private overflow(item: StreamItem): Finding[] {
    if (this.model.stopped) return [];
    const at = { event: ++this.summary.events, line: item.line, type: "" };
    const crs = item.raw.includes("\r");
    const f = finding(at, "fatal", {
      code: "SSE_BUFFER_LIMIT",
      message: `${CLIENT_SSE_LIMIT / (1024 * 1024)} MiB of text without an event boundary (two LFs): @ag-ui/client 1.0.0's SSE parser stops there and the run fails`,
      ...(crs ? { hint: `the stream ends its lines with CR LF (or CR), and the client splits events only at two LFs: ${LF_HINT}` } : {}),
    });
    this.model.stopped = f;
    this.summary.fatal++;
    return [f];
  }
}

const LF_HINT = "end SSE lines with LF alone (`fix` writes them so)";

/**
 * A block whose data the client cannot parse, and which has CRs in it: the
 * likely cause is a server that ends its lines with CRLF (sse-starlette's
 * default, for one). The client splits events only at "\n\n", so such a
 * stream reaches it as one block of every event's data lines joined.
 */
function lineEnds(f: Finding): Finding {
  return {
    ...f,
    code: "SSE_LINE_ENDS",
    message: `the stream ends its lines with CR LF (or CR): @ag-ui/client 1.0.0 splits events only at two LFs, so it read the events from here on as one, whose data is not JSON (${f.message}), and the run fails`,
    hint: LF_HINT,
  };
}
