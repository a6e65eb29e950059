/**
 * What a framing decoder (rpc/node/framing.ts) finds in the byte stream, and
 * what the dispatcher answers. Bodies are UTF-8 text, checked strictly:
 * invalid UTF-8 is reported, never replaced with U+FFFD, because that would
 * silently change the client's strings (protocol/README.md §2).
 */
export type Frame =
  | {
      kind: "text";
      text: string;
      /**
       * LSP framing's `Agui-Text-Length: M` (protocol/README.md §2): the M bytes after the body, a
       * large text that travels as itself rather than escaped into the JSON (fixStream's text,
       * openStream's request body). The dispatcher puts it in its param.
       */
      attachment?: string;
      /** LSP framing's `Agui-Reply-Text: attachment`: the reply's `text` goes back as its attachment (§2). */
      replyText?: true;
    }
  /** A frame whose bytes are not UTF-8. */
  | { kind: "bad-utf8" }
  /** A frame over the size limit, discarded as it streamed in. `head` is its first bytes, to find an id in. */
  | { kind: "oversized"; bytes: number; head: string }
  /** LSP framing: a header block without a usable Content-Length. The decoder resynchronizes at the next one. */
  | { kind: "bad-header"; detail: string }
  /**
   * A line where a message should start that is not one: not an LSP header,
   * nor (`json`, under `--framing auto`) a JSON line. `head` is its first
   * bytes, `bytes` its length; reading goes on at the next line.
   */
  | { kind: "stray-line"; head: string; bytes: number; json: boolean };
