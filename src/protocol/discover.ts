import { DISCOVER_JSON } from "./discover.generated.js";
import type { DiscoverResult } from "./types.generated.js";

let document: DiscoverResult | undefined;

/**
 * The OpenRPC document that rpc.discover returns (protocol/README.md §12),
 * parsed on the first call rather than at start. The same object is returned
 * every time: callers only serialize it.
 */
export function discoverDocument(): DiscoverResult {
  // The text is protocol/openrpc.json with its examples, generated and
  // compared with its sources by test/protocol: a JSON object, so a DiscoverResult.
  document ??= JSON.parse(DISCOVER_JSON) as DiscoverResult;
  return document;
}
