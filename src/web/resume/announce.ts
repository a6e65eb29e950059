/**
 * The header a server sends on every answer it can resume (protocol/README.md §16): the proxy and
 * the middleware set it, and `resumableFetch` rejoins only an answer that carried it. Named after
 * AG-UI's `transport.resumable` capability (TransportCapabilities in @ag-ui/core), which says the
 * same of an agent as a whole. Browser-safe: the server side imports it from here.
 */
export const RESUMABLE_HEADER = "ag-ui-resumable";
export const RESUMABLE_VALUE = "true";
