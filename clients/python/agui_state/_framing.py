"""The asyncio client's wire: LSP framing (protocol/README.md §2), a request with one attachment, and the
reply frames read back.

A request is `Content-Length: N\\r\\n\\r\\n` and N bytes of JSON. A long text, fixStream's `text` or
openStream's `request.body`, travels as an attachment instead: `Agui-Text-Length: M` in the header block and
M bytes of UTF-8 after the JSON. Such a fixStream asks for its reply's `text` the same way (`Agui-Reply-Text:
attachment`), and a reply frame's attachment is put back as its result's `text`. JSON-encoding a megabyte
text as a string, ASCII-escaped, costs the client milliseconds, and the sidecar more to parse, scan and copy
it: on a run with a 1 MB state that was a third of what the middleware cost over `agui-state proxy`
(docs/benchmarks.md, B25). Raw UTF-8 costs a copy.

A fixStream text given as bytes (the middleware's: the app's UTF-8, in whole characters) goes as those bytes,
and its reply's attachment is given back as bytes (_async.py), written on to the client without a decode or
an encode.

The sidecar answers each request in the framing it came in, and once it has read an LSP frame on a
connection it reads only LSP frames there: so every request of a session goes framed, the small ones too.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from ._wire import encode

# Characters of a text from which it goes as the attachment. Below this the JSON string costs well under
# 0.1 ms on either side, and the frame stays the plain one that every test of the JSON path reads.
ATTACH_MIN = 64 * 1024
# Characters encoded to UTF-8 at a time: a text of tens of MiB is encoded in a worker thread (_async.py),
# and between two slices the event loop's thread can take the GIL, which one str.encode holds throughout.
_SLICE = 1 << 20
# A reply's header block is `Content-Length: N\r\n\r\n`: past this many bytes without its end, what the
# sidecar writes is not frames at all.
_MAX_HEAD = 8192
_LENGTH = b"content-length"
_TEXT_LENGTH = b"agui-text-length"


def _utf8(text: str) -> Optional[bytes]:
    """`text` as UTF-8, strictly; None when it cannot be (a lone surrogate, which only JSON's \\ud800
    escape can carry): it then goes in the JSON, as it always did."""
    try:
        if len(text) <= _SLICE:
            return text.encode("utf-8")
        # A slice boundary never splits a character: a str holds code points, not UTF-16 units.
        return b"".join([text[i:i + _SLICE].encode("utf-8") for i in range(0, len(text), _SLICE)])
    except UnicodeEncodeError:
        return None


def _attachment(method: str, params: Mapping[str, Any]) -> Tuple[Optional[bytes], Mapping[str, Any]]:
    """The attachment of a request (protocol/README.md §2: fixStream's `text`, openStream's `request.body`),
    and the params without it; (None, params) when the text is short, absent or cannot be encoded."""
    if method == "fixStream":
        text = params.get("text")
        if isinstance(text, bytes):  # UTF-8 in whole characters already (the middleware's: _utf8.py)
            if len(text) >= ATTACH_MIN:
                return text, {k: v for k, v in params.items() if k != "text"}
            return None, {**params, "text": text.decode("utf-8", "replace")}
        if isinstance(text, str) and len(text) >= ATTACH_MIN:
            raw = _utf8(text)
            if raw is not None:
                return raw, {k: v for k, v in params.items() if k != "text"}
    elif method == "openStream":
        request = params.get("request")
        body = request.get("body") if isinstance(request, Mapping) else None
        if isinstance(body, str) and len(body) >= ATTACH_MIN:
            raw = _utf8(body)
            if raw is not None:
                assert isinstance(request, Mapping)
                return raw, {**params, "request": {k: v for k, v in request.items() if k != "body"}}
    return None, params


def frame(msg_id: int, method: str, params: Mapping[str, Any]) -> bytes:
    """One request as an LSP frame, its long text as the attachment. Raises ValueError as encode() does."""
    raw, params = _attachment(method, params)
    body = encode(msg_id, method, params, b"")
    if raw is None:
        return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    # A fixStream's repaired text is about as long as the text given (a LangGraph answer's RAW events carry
    # the state again): it comes back as the reply's attachment too. Only where the text given went as one:
    # an attachment is UTF-8, which a lone surrogate kept from a text sent in JSON could not come back in.
    reply = b"Agui-Reply-Text: attachment\r\n" if method == "fixStream" else b""
    return b"".join([b"Content-Length: %d\r\nAgui-Text-Length: %d\r\n%b\r\n" % (len(body), len(raw), reply),
                     body, raw])


class FramingError(ValueError):
    """What the sidecar wrote is not an LSP frame: nothing after it can be read."""


def _lengths(data: bytes, start: int, end: int) -> Tuple[int, int]:
    """The Content-Length and the Agui-Text-Length (-1: none) of the header block data[start:end] (its
    lines, without the blank one)."""
    if data.startswith(b"Content-Length: ", start) and data.find(b"\r\n", start, end) < 0:
        digits = data[start + 16:end]  # the usual reply: that header alone
        if digits.isdigit():  # ASCII digits only, for bytes
            return int(digits), -1
    found = {_LENGTH: -1, _TEXT_LENGTH: -1}
    for line in data[start:end].split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise FramingError(f"not a header line in a reply frame: {line[:80]!r}")
        name = name.lower()
        if name in found:
            value = value.strip(b" \t")
            if not value.isdigit() or found[name] >= 0:
                raise FramingError(f"a bad {name.decode()} in a reply frame: {line[:80]!r}")
            found[name] = int(value)
    if found[_LENGTH] < 0:
        raise FramingError(f"a reply frame without Content-Length: {data[start:end][:80]!r}")
    return found[_LENGTH], found[_TEXT_LENGTH]


Body = Tuple[bytes, Optional[bytes]]
"""A reply frame's JSON, and its attachment (the result's `text`, protocol/README.md §2, as UTF-8), or None."""


class FrameReader:
    """Stdout's bytes in, the bodies of complete frames out. One find per header block; a body is sliced
    out of the chunk it is in whole, else its pieces are joined once. No limit but the frame's own length
    (a reply may be as large as the sidecar's --max-message-bytes)."""

    def __init__(self) -> None:
        self._head = b""  # the start of a header block that a chunk cut off
        self._want = -1   # the frame's length past its header block (JSON and attachment) while it is read
        self._json = 0    # the JSON's part of it
        self._text = -1   # the attachment's, -1 when there is none
        self._parts: List[bytes] = []
        self._got = 0

    @property
    def pending(self) -> bool:
        """A frame is begun and not complete."""
        return bool(self._head) or self._want >= 0

    def _body(self, frame: memoryview) -> Body:
        """The frame's JSON and attachment, each copied once out of the buffer it was read into."""
        if self._text < 0:
            return bytes(frame), None
        return bytes(frame[:self._json]), bytes(frame[self._json:])

    def feed(self, data: bytes) -> List[Body]:
        """The bodies that `data` completes. Raises FramingError at what is not a frame."""
        bodies: List[Body] = []
        if self._head:
            data, self._head = self._head + data, b""
        pos, size = 0, len(data)
        while pos < size:
            if self._want < 0:
                if data[pos] in b"{[":  # a JSON line: an NDJSON reply, which this reader would wait on for ever
                    raise FramingError(f"a reply that is not in a frame: {data[pos:pos + 80]!r}")
                end = data.find(b"\r\n\r\n", pos)
                if end < 0:
                    if size - pos > _MAX_HEAD:
                        raise FramingError(f"no end of a reply frame's header within {_MAX_HEAD} bytes")
                    self._head = data[pos:]
                    break
                self._json, self._text = _lengths(data, pos, end)
                self._want = self._json + max(self._text, 0)
                pos = end + 4
                if self._want == 0:
                    bodies.append(self._body(memoryview(b"")))
                    self._want = -1
                continue
            need = self._want - self._got
            if not self._parts and size - pos >= need:  # the whole frame in this chunk: sliced, not copied
                bodies.append(self._body(memoryview(data)[pos:pos + need]))
                pos += need
                self._want = -1
                continue
            piece = data[pos:pos + need]
            self._parts.append(piece)
            self._got += len(piece)
            pos += len(piece)
            if self._got == self._want:
                bodies.append(self._body(memoryview(b"".join(self._parts))))
                self._parts, self._got, self._want = [], 0, -1
        return bodies
