/**
 * A resumable answer's body read to its end as HttpAgent reads it, chunk by chunk, for the tests of a
 * run that ends broken (issue 38, "a client that knows when to stop"). HttpAgent itself rethrows a
 * failed body from its reader's cancel() as an unhandled rejection (@ag-ui/client 1.0.0,
 * runHttpRequest), so these tests read the body of resumableFetch's answer here instead.
 */
export async function readToFailure(res: Response): Promise<{ text: string; failed: unknown; types: string[] }> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  const failed = await (async () => {
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) return undefined;
      text += decoder.decode(chunk.value, { stream: true });
    }
  })().catch((e: unknown) => e);
  return { text, failed, types: [...text.matchAll(/"type":"([A-Z_]+)"/g)].map((m) => m[1] as string) };
}
