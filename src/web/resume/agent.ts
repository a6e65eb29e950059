import { HttpAgent, runHttpRequest, transformHttpEventStream, type BaseEvent, type HttpAgentConfig, type RunAgentInput } from "@ag-ui/client";
import type { Observable } from "rxjs";
import { resumableFetch, type ResumeOptions } from "./resumable-fetch.js";

/**
 * An HttpAgent whose runs survive a dropped connection (its fetch is `resumableFetch`), and whose
 * `connect()`, which HttpAgent 1.0.0 leaves unimplemented, asks the server's connect route
 * (`POST <url>/connect` with the RunAgentInput, protocol/README.md §16) for the thread's latest run,
 * so that `agent.connectAgent()` brings a reloaded page back to where the run is.
 */
export class ResumableHttpAgent extends HttpAgent {
  constructor(config: HttpAgentConfig & { resume?: ResumeOptions }) {
    const { resume, ...rest } = config;
    super({ ...rest, fetch: resumableFetch({ ...resume, ...(config.fetch ? { fetch: config.fetch } : {}) }) });
  }

  protected override connect(input: RunAgentInput): Observable<BaseEvent> {
    return transformHttpEventStream(runHttpRequest(() => this.fetch(`${this.url.replace(/\/+$/, "")}/connect`, this.requestInit(input))));
  }
}
