import type { IncomingMessage } from "node:http";
import { baselineOfBody, type Baseline } from "../edge/baseline.js";

export type { Baseline };

/**
 * Keeps a copy of the request body as it streams to the upstream, so the
 * mirror can start from `RunAgentInput.state` when the answer is an event
 * stream. The body is forwarded as it arrives either way; only an SSE answer
 * waits for `read()`, which resolves when the body has ended.
 */
export class BodyTap {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private overflow = false;
  private readonly ended: Promise<void>;

  /** `limit`: the bytes kept at most (--max-request-body); past it the baseline is not known. */
  constructor(
    private readonly req: IncomingMessage,
    private readonly limit: number,
  ) {
    this.ended = new Promise((resolve) => {
      req.on("end", resolve);
      // A body cut off by the client still settles: the connection is gone
      // and the response with it, so the baseline no longer matters.
      req.on("close", resolve);
    });
  }

  /** Called for every body chunk on its way upstream. */
  take(chunk: Buffer): void {
    if (this.overflow) return;
    this.bytes += chunk.length;
    if (this.bytes > this.limit) {
      this.overflow = true;
      this.chunks = [];
    } else this.chunks.push(chunk);
  }

  /** The state the client says it holds: RunAgentInput.state when it is an object, else {}. */
  async read(): Promise<Baseline> {
    await this.ended;
    return baselineOfBody(this.overflow ? undefined : Buffer.concat(this.chunks).toString("utf8"), this.req.headers["content-encoding"]);
  }
}
