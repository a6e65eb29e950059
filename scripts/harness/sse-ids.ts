/** Our event ids as the proxy and the stream methods write them (protocol/README.md §16): `<run>.<seq>.<nonce>`. */
export const ID_LINE = /^id: [A-Za-z0-9_-]{12}\.[1-9][0-9]*\.[A-Za-z0-9_-]{11}\n/;

/** `text` with each of our id lines written as `id: <id>`: for comparing a stream whose ids are random. */
export const anyId = (text: string): string => text.replace(new RegExp(ID_LINE.source.slice(1), "gm"), "id: <id>\n");

/**
 * An SSE text as it was before our ids were stamped on it: each block's first line, when it is one
 * of our ids, is taken out. Throws when a block with data has no id, or one has two: for tests that
 * hold the rest of a stream to `fix`'s bytes while resume is on.
 */
export function withoutIds(text: string): string {
  return text
    .split(/(?<=\n\n)/)
    .map((block) => {
      const stamped = ID_LINE.test(block);
      const rest = stamped ? block.replace(ID_LINE, "") : block;
      const data = /^data(:|\n)/m.test(rest);
      if (data !== stamped || /^id[:\n]/m.test(rest)) throw new Error(`an event with ${stamped ? "two ids" : "no id"}, or an id on a block without data: ${JSON.stringify(block.slice(0, 200))}`);
      return rest;
    })
    .join("");
}
