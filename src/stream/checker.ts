import type { JsonObject, Path } from "../core/index.js";
import { Client, type Summary } from "./client.js";
import { EventReader, type StreamItem } from "./events.js";
import { LF_HINT, TEXT, kinded, type Finding } from "./findings.js";
import type { Observed } from "./fixer.js";

export type { Summary } from "./client.js";

/**
 * `agui-state check` as a stream consumer: bytes in, the findings of every
 * event they complete out, replayed as @ag-ui/client 1.0.0 would (client.ts,
 * without a repair policy) from `state` (default {}).
 */
export class StreamChecker {
  // The client's own reading of SSE: check must see the events the client sees.
  private readonly reader = new EventReader("client");
  readonly model: Client;

  /**
   * `state`: what the client holds before the stream; undefined when it is
   * not known (no --state): the replay starts from {}, and the first
   * snapshot applied is SNAPSHOT_REPLACES_UNKNOWN (§13). `onEvent`: called
   * once per event the client reads, as fix's is (an HTML report's hook;
   * absent, it costs nothing). `own` (`--own`, §13): the members the server
   * owns, which a snapshot may replace without a `wiped` finding.
   */
  constructor(state?: JsonObject, private readonly onEvent?: (e: Observed) => void, own: readonly Path[] = []) {
    this.model = new Client({ state: state ?? {}, known: state !== undefined, own });
  }

  get summary(): Summary {
    return this.model.summary;
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
        // The client's SSE parser gave up: its run fails here, counted as an event of its own.
        const f = this.model.overflow(item.line, TEXT.bufferLimit("check", item.raw.includes("\r")));
        if (f) out.push(f);
        continue;
      }
      if (item.data === undefined) continue;
      const crs = item.raw.includes("\r");
      // The client's own apply stage: every finding has a kind.
      const findings = kinded(this.model.feed(item.data, item.line).findings);
      for (const f of findings) out.push(f.code === "INVALID_JSON" && crs ? lineEnds(f) : f);
      if (this.onEvent) this.onEvent({ data: item.data, out: undefined, findings, state: this.model.state });
    }
    return out;
  }
}

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
