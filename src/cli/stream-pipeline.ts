import type { NewFixer, Pipeline } from "../service/stream-service.js";

/**
 * The stream pipeline, loaded on the first openStream rather than at start:
 * esbuild keeps a dynamic import's module lazy in the bundle, so a sidecar
 * that serves only threads never runs @ag-ui/core's schemas, zod or
 * fast-json-patch, and starts no slower for them. The import settles after the
 * message that started it; until then the transport holds back every later
 * message (src/rpc/node/server.ts), so a part sent in the same read as its
 * openStream still finds the pipeline there.
 */
export function lazyPipeline(): Pipeline {
  let make: NewFixer | undefined;
  let loading: Promise<void> | undefined;
  return {
    get: () => make,
    load: () => {
      if (make !== undefined || loading !== undefined) return;
      loading = import("../stream/fixer.js").then(
        ({ StreamFixer }) => {
          make = (opts) => new StreamFixer(opts);
          loading = undefined;
        },
        // Cannot happen in the bundle; elsewhere, the next openStream tries again.
        () => {
          loading = undefined;
        },
      );
    },
    loading: () => loading,
  };
}
