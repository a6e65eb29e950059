"""The asyncio client's wire: LSP framing (protocol/README.md §2), a request with one attachment, and the
reply frames read back.

A request is `Content-Length: N\\r\\n\\r\\n` and N bytes of JSON. A long text, fixStream's `text` or
openStream's `request.body`, travels as an attachment instead: `Agui-Text-Length: M` in the header block and
M bytes of UTF-8 after the JSON. JSON-encoding a megabyte text as a string, ASCII-escaped, costs the client
about 14 ms, and the sidecar as much again to parse, scan and copy it: on a run with a 1 MB state that was
most of what the middleware cost over `agui-state proxy` (docs/benchmarks.md, B25). Raw UTF-8 costs a copy.

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
    return b"".join([b"Content-Length: %d\r\nAgui-Text-Length: %d\r\n\r\n" % (len(body), len(raw)), body, raw])


class FramingError(ValueError):
    """What the sidecar wrote is not an LSP frame: nothing after it can be read."""


def _content_length(data: bytes, start: int, end: int) -> int:
    """The Content-Length of the header block data[start:end] (its lines, without the blank one)."""
    if data.startswith(b"Content-Length: ", start) and data.find(b"\r\n", start, end) < 0:
        digits = data[start + 16:end]  # the sidecar's only header, the usual case
        if digits.isdigit():  # ASCII digits only, for bytes
            return int(digits)
    length = None
    for line in data[start:end].split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise FramingError(f"not a header line in a reply frame: {line[:80]!r}")
        if name.lower() == _LENGTH:
            value = value.strip(b" \t")
            if not value.isdigit() or length is not None:
                raise FramingError(f"a bad Content-Length in a reply frame: {line[:80]!r}")
            length = int(value)
    if length is None:
        raise FramingError(f"a reply frame without Content-Length: {data[start:end][:80]!r}")
    return length


class FrameReader:
    """Stdout's bytes in, the bodies of complete frames out. One find per header block; a body is sliced
    out of the chunk it is in whole, else its pieces are joined once. No limit but the frame's own length
    (a reply may be as large as the sidecar's --max-message-bytes)."""

    def __init__(self) -> None:
        self._head = b""  # the start of a header block that a chunk cut off
        self._want = -1   # the body's length while it is read, else -1
        self._parts: List[bytes] = []
        self._got = 0

    @property
    def pending(self) -> bool:
        """A frame is begun and not complete."""
        return bool(self._head) or self._want >= 0

    def feed(self, data: bytes) -> List[bytes]:
        """The bodies that `data` completes. Raises FramingError at what is not a frame."""
        bodies: List[bytes] = []
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
                self._want = _content_length(data, pos, end)
                pos = end + 4
                if self._want == 0:
                    bodies.append(b"")
                    self._want = -1
                continue
            need = self._want - self._got
            if not self._parts and size - pos >= need:  # the whole body in this chunk: one slice
                bodies.append(data[pos:pos + need])
                pos += need
                self._want = -1
                continue
            piece = data[pos:pos + need]
            self._parts.append(piece)
            self._got += len(piece)
            pos += len(piece)
            if self._got == self._want:
                bodies.append(b"".join(self._parts))
                self._parts, self._got, self._want = [], 0, -1
        return bodies

