"""The request body in agui_state.asgi: handed to the app as it arrives, with a copy kept, up to
BASELINE_LIMIT, for its RunAgentInput (the baseline, protocol/README.md §13), as the proxy's tap does
(src/proxy/baseline.ts). Past the limit nothing is kept and the baseline is {}."""
from __future__ import annotations

import asyncio
import codecs
import json
import re
from typing import Any, Dict, List, MutableMapping, Optional, Tuple

Message = MutableMapping[str, Any]

BASELINE_LIMIT = 64 << 20  # bytes of request body kept for the baseline: the proxy's and the Go middleware's
# A body past this many bytes is parsed in a worker thread, in parts (loads_in_parts). Below it json.loads on
# the loop takes under about 3 ms (RunAgentInput-like JSON parses at about 2.5 ms a MiB on a test machine),
# less than the loop may wait anyway for the GIL a thread holds (the 5 ms switch interval).
PARSE_OFF_LOOP = 1 << 20


class BodyTap:
    """What of the request body went by: its bytes while they are within BASELINE_LIMIT, and whether it
    ended (its last message, or a disconnect that cut it off)."""

    def __init__(self) -> None:
        self.chunks: List[bytes] = []
        self.size = 0
        self.too_large = False
        self.ended = asyncio.Event()

    def take(self, message: Message) -> None:
        if self.ended.is_set():
            return
        if message["type"] != "http.request":  # the client left mid-body: what came is all there is
            self.ended.set()
            return
        body = message.get("body", b"")
        if not self.too_large:
            self.size += len(body)
            if self.size > BASELINE_LIMIT:
                self.too_large, self.chunks = True, []
            elif body:
                self.chunks.append(body)
        if not message.get("more_body", False):
            self.ended.set()

    async def run_input(self, headers: Any) -> Tuple[Dict[str, Any], Optional[str]]:
        """The RunAgentInput ({} when there is none), and why it could not be read, when that is so."""
        for name, value in headers:
            if name.lower() == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
                return {}, "the request body is content-encoded"
        if self.too_large:
            return {}, f"the request body is too large to keep (more than {BASELINE_LIMIT >> 20} MiB)"
        if not self.size:
            return {}, None
        try:
            if self.size > PARSE_OFF_LOOP:
                run_input = await asyncio.to_thread(loads_in_parts, self.chunks)
            else:
                run_input = json.loads(b"".join(self.chunks))
        except ValueError:
            return {}, "the request body is not JSON"
        return (run_input, None) if isinstance(run_input, dict) else ({}, None)


def baseline(run_input: Dict[str, Any]) -> Tuple[Optional[Any], Optional[str]]:
    """RunAgentInput.state (None: leave it out, the sidecar starts from {}), and why not, when it is not."""
    state = run_input.get("state")
    if state is None or isinstance(state, dict):
        return state, None
    return None, "RunAgentInput.state is not an object"


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_PART = 1 << 20  # bytes decoded at a time
_WALKED = 2  # depths walked here: the body's members, and the members or items of each (messages, state)


def loads_in_parts(chunks: List[bytes]) -> Any:
    """json.loads of the joined `chunks`, for a worker thread. json.loads holds the GIL from start to end, so
    in a thread it would stop the loop as long as on it; here the two outer levels are walked in Python and
    each value below (a message, a member of the state) is one json call, between which the loop gets the
    GIL back. The same values and the same errors (ValueError) as json.loads."""
    text = _decoded(chunks)
    value, end = _value(text, _WS.match(text, 0).end(), 0)  # type: ignore[union-attr]
    end = _WS.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def _decoded(chunks: List[bytes]) -> str:
    """The body as text, as json.loads decodes it, a MiB at a time (one decode of it all would hold the GIL)."""
    head = chunks[0][:4] if chunks[0][3:4] else b"".join(chunks)[:4]  # all that detect_encoding reads
    decoder = codecs.getincrementaldecoder(json.detect_encoding(head))("surrogatepass")
    parts = [decoder.decode(view[at:at + _PART]) for chunk in chunks
             for view in (memoryview(chunk),) for at in range(0, len(chunk), _PART)]
    parts.append(decoder.decode(b"", final=True))
    return "".join(parts)


def _value(s: str, i: int, depth: int) -> Tuple[Any, int]:
    opening = s[i:i + 1]
    if depth >= _WALKED or opening not in ("{", "["):
        return _DECODER.raw_decode(s, i)

    def skip(at: int) -> int:
        return _WS.match(s, at).end()  # type: ignore[union-attr]

    def after(at: int, closing: str) -> Tuple[bool, int]:
        """Whether the container ends at `at` (past its closing), else past the comma."""
        if s[at:at + 1] == closing:
            return True, at + 1
        if s[at:at + 1] != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", s, at)
        return False, skip(at + 1)

    i = skip(i + 1)
    if opening == "[":
        items: List[Any] = []
        if s[i:i + 1] == "]":
            return items, i + 1
        while True:
            item, i = _value(s, i, depth + 1)
            items.append(item)
            done, i = after(skip(i), "]")
            if done:
                return items, i
    members: Dict[str, Any] = {}
    if s[i:i + 1] == "}":
        return members, i + 1
    while True:
        if s[i:i + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", s, i)
        key, i = json.decoder.scanstring(s, i + 1)  # type: ignore[attr-defined]
        i = skip(i)
        if s[i:i + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", s, i)
        members[key], i = _value(s, skip(i + 1), depth + 1)
        done, i = after(skip(i), "}")
        if done:
            return members, i
