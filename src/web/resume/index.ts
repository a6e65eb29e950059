// agui-state-sidecar/resume: the browser side of resume (protocol/README.md §16).
export { resumableFetch, type FetchFn, type ResumeOptions } from "./resumable-fetch.js";
export { ResumableHttpAgent } from "./agent.js";
export { RESUMABLE_HEADER, RESUMABLE_VALUE } from "./announce.js";
