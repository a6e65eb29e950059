"""The app's response body as the sidecar is given it: UTF-8 bytes in whole characters (protocol/README.md §2:
fixStream's text is cut anywhere but never inside a character), as they came wherever they are UTF-8 already.

A character that a chunk's end cuts is held for the next chunk. Bytes that are not UTF-8 become U+FFFD, each
maximal bad sequence one, as the client's TextDecoder reads them (and as the middleware always did, when it
decoded every chunk to str). Most of an event stream is ASCII, which one bytes.isascii() tells: such a chunk goes
on as the same object, never decoded, encoded or copied."""
from __future__ import annotations


def _cut(data: bytes) -> int:
    """Where the character that `data` ends inside begins, or len(data) when it ends whole. Only a lead byte
    can begin a character, and the decoder starts a new one at every lead byte, so that cutting there reads
    the same as reading the bytes whole, a bad sequence included."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80:
            return end
        if byte >= 0xC0:  # a lead byte: how many bytes its character takes
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4 if byte < 0xF8 else 1
            return end - back if back < need else end
    return end  # continuation bytes only: bad whatever follows, replaced now


class Utf8Parts:
    """One response's chunks in, the UTF-8 of whole characters out."""

    def __init__(self) -> None:
        self.held = b""  # the start of a character that the last chunk cut off

    def part(self, chunk: bytes, final: bool) -> bytes:
        data = self.held + chunk if self.held else chunk
        if data.isascii():
            self.held = b""
            return data
        cut = len(data) if final else _cut(data)
        whole, self.held = (data, b"") if cut == len(data) else (data[:cut], data[cut:])
        try:
            str(whole, "utf-8")  # strict: whether it is UTF-8; the str is not kept
            return whole
        except UnicodeDecodeError:
            return str(whole, "utf-8", "replace").encode("utf-8")
