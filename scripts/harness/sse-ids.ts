/** Our event ids as the proxy and the stream methods write them (protocol/README.md §16): `<run>.<seq>.<nonce>`. */
export const ID_LINE = /^id: [A-Za-z0-9_-]{12}\.[1-9][0-9]*\.[A-Za-z0-9_-]{11}\n/;

/** A resumable answer's opening block (protocol/README.md §16): the id `<run>.0.<nonce>` alone, before any event. */
export const OPENING = /^id: [A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+\n\n/;

/** `text` with each of our id lines, the opening block's too, written as `id: <id>`: for comparing a stream whose ids are random. */
export const anyId = (text: string): string => text.replace(/^id: [A-Za-z0-9_-]+\.(?:0|[1-9][0-9]*)\.[A-Za-z0-9_-]+\n/gm, "id: <id>\n");

/**
 * An SSE text as it was before our ids were stamped on it: each block's first line, when it is one
 * of our ids, is taken out, and so is the opening block when it starts the text. Throws when a block
 * with data has no id, or one has two, or an id stands alone anywhere else: for tests that hold the
 * rest of a stream to `fix`'s bytes while resume is on.
 */
export function withoutIds(text: string): string {
  return text
    .split(/(?<=\n\n)/)
    .map((block, i) => {
      if (i === 0 && OPENING.test(block) && block.replace(OPENING, "") === "") return "";
      const stamped = ID_LINE.test(block);
      const rest = stamped ? block.replace(ID_LINE, "") : block;
      const data = /^data(:|\n)/m.test(rest);
      if (data !== stamped || /^id[:\n]/m.test(rest)) throw new Error(`an event with ${stamped ? "two ids" : "no id"}, or an id on a block without data: ${JSON.stringify(block.slice(0, 200))}`);
      return rest;
    })
    .join("");
}

/**
 * Reads a resumable answer until `events` whole blocks have come after its opening block, then lets
 * the rest go (the reader is cancelled): the text read, opening block included. For the tests that cut
 * a client after a run's first events.
 */
export async function readFirstEvents(reader: ReadableStreamDefaultReader<Uint8Array>, events: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  while ((text.replace(OPENING, "").match(/\n\n/g) ?? []).length < events) {
    const chunk = await reader.read();
    if (chunk.done) throw new Error(`the answer ended early: ${text}`);
    text += decoder.decode(chunk.value, { stream: true });
  }
  await reader.cancel();
  return text;
}
