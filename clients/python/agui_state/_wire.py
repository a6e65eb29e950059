"""The wire: a request as one line of JSON, and the replies in a line of stdout (JSON-RPC 2.0 over stdio,
one message per line, protocol/README.md §2). The asyncio client frames the same JSON (_framing.py).

Both directions use the json module's C encoder and scanner, built once. json.dumps and json.loads are
the same C code behind a few layers of Python that a client pays on every call: JSONEncoder.encode
builds a new C encoder each time, and JSONDecoder.decode matches whitespace around the value with two
regular expressions. Where the C code is missing (another Python), the plain json functions do it."""
from __future__ import annotations

import json
from json import encoder as _encoder
from typing import Any, Dict, List, Mapping

_ENCODER = json.JSONEncoder(allow_nan=False)
_DECODER = json.JSONDecoder()

# check_circular off (markers None): the markers dict would be shared by every call, and the C encoder
# leaves its entries behind when an encode fails halfway (NaN, a value json cannot encode), so a later
# request would be refused as circular. A cycle still fails, as RecursionError, turned into ValueError.
_ENCODE = (_encoder.c_make_encoder(None, _ENCODER.default, _encoder.encode_basestring_ascii, None, ": ", ", ",
                                   False, False, False)
           if _encoder.c_make_encoder is not None else None)


def encode(msg_id: int, method: str, params: Mapping[str, Any], end: bytes = b"\n") -> bytes:
    """One request as a line (`end` b"": its JSON alone, the body of a framed request, _framing.py), the
    bytes json.dumps would give. ASCII-escaped, so a lone surrogate from json.loads still travels; NaN and
    Infinity raise ValueError here, before anything is sent, and so does a value that contains itself."""
    request = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    if _ENCODE is None:
        return _ENCODER.encode(request).encode("ascii") + end
    try:
        return "".join(_ENCODE(request, 0)).encode("ascii") + end
    except RecursionError:
        raise ValueError(f"{method}: params nest too deeply to encode, or contain themselves") from None


def _loads(text: str) -> Any:
    """json.loads(text), without its layers for the usual case: one value, nothing around it."""
    try:
        value, end = _DECODER.scan_once(text, 0)
        if end == len(text):
            return value
    except StopIteration:  # no value at 0: whitespace first, or nothing JSON
        pass
    return json.loads(text)  # the full rules: whitespace around the value, or ValueError


def replies(line: bytes) -> List[Dict[str, Any]]:
    """The replies in one line of stdout (a batch is an array); anything that is not JSON is skipped."""
    try:
        # Decoded here rather than by json.loads, which would first guess the encoding: JSON-RPC over
        # stdio is UTF-8 (RFC 8259 §8.1). An empty or blank line is a ValueError too.
        msg = _loads(line.decode("utf-8", "surrogatepass"))
    except ValueError:
        return []
    if isinstance(msg, dict):  # the usual case, first
        return [msg] if "id" in msg else []
    return [r for r in msg if isinstance(r, dict) and "id" in r] if isinstance(msg, list) else []


class LineSplitter:
    """Bytes in, complete lines out, with no length limit (a reply may be as large as the sidecar's
    --max-message-bytes, far beyond asyncio's 64 KiB readline limit). Each chunk is scanned once."""

    def __init__(self) -> None:
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> List[bytes]:
        lines: List[bytes] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._partial += chunk[start:]
                return lines
            if self._partial:
                self._partial += chunk[start:nl]
                lines.append(bytes(self._partial))
                self._partial.clear()
            else:
                lines.append(chunk[start:nl])
            start = nl + 1

    def rest(self) -> bytes:
        """What followed the last newline: a final line without one."""
        return bytes(self._partial)
