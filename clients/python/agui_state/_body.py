"""The request body in agui_state.asgi: handed to the app as it arrives, with a copy kept, up to the
`bodyBytes` classifyRequest gives, for openStream's `request` (protocol/README.md §14), as the proxy's tap
does. The middleware reads nothing of it itself: the sidecar takes the baseline from it."""
from __future__ import annotations

import asyncio
from typing import Any, List, MutableMapping, Optional

Message = MutableMapping[str, Any]


# Past this many bytes the body is joined and decoded in a worker thread, so that the event loop is not
# held (issue 39): below it that takes well under a millisecond.
OFF_LOOP = 1 << 20


class BodyTap:
    """What of the request body went by: its bytes while they are within `limit`, and whether it ended (its
    last message, or a disconnect that cut it off)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: List[bytes] = []
        self.size = 0
        self.whole = True  # every byte of it is in `chunks`: not past the limit, and not cut off
        self.ended = asyncio.Event()

    @property
    def full(self) -> bool:
        """Past the limit: nothing more is kept, and nothing more is read before the app asks for it."""
        return self.size > self.limit

    def take(self, message: Message) -> None:
        if self.ended.is_set():
            return
        if message["type"] != "http.request":  # the client left mid-body: what came is all there is
            self.whole = False
            self.ended.set()
            return
        body = message.get("body", b"")
        if self.whole:
            self.size += len(body)
            if self.full:
                self.whole, self.chunks = False, []
            elif body:
                self.chunks.append(body)
        if not message.get("more_body", False):
            self.ended.set()

    async def text(self) -> Optional[str]:
        """The body as text (bad bytes replaced, as the sidecar reads it), when the whole of it was kept."""
        if not self.whole or not self.ended.is_set():
            return None
        if self.size > OFF_LOOP:
            return await asyncio.to_thread(_decode, self.chunks)
        return _decode(self.chunks)


def _decode(chunks: List[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", "replace")
