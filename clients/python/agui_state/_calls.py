"""The asyncio client's calls, whatever carries them: a spawned sidecar's pipes (_async.py) or a connection to a
shared sidecar (_link.py). Each call is one framed write and a future of its own; the transport's data callback
splits what comes back into frames (LSP framing, _framing.py) and sets each reply on its caller's future
directly, so a reply costs one wake-up, the caller's. When no reply can come any more (the process exited, the
connection closed), every call waiting fails at once, and every later one too."""
from __future__ import annotations

import asyncio
import collections
from typing import Any, Deque, Dict, List, Mapping, Optional, Set

from ._common import Result
from ._errors import SidecarExitedError, error_from_reply
from ._framing import FrameReader, FramingError, frame
from ._wire import replies


class Calls:
    """The calls in flight on one session (id -> Future), and the writes that wait for room. A subclass sets
    `writer` (where requests go), feeds `_replies` what it reads, calls `_finish` when nothing more can be read,
    and says what a call then fails with (`exit_error`) and how the session is ended at once (`abort`)."""

    writer: asyncio.WriteTransport

    def __init__(self, logs: Optional[Deque[str]]) -> None:
        loop = asyncio.get_running_loop()
        self.loop, self.logs = loop, logs
        self.pending: Dict[int, "asyncio.Future[Result]"] = {}
        self.raw_text: Set[int] = set()  # fixStream calls whose text was bytes: their reply's attachment stays so
        self.frames = FrameReader()  # replies, read as LSP frames
        self.exited = self.closing = self.broken = False
        self.paused = False  # the writer's buffer is full: callers wait in call() until the loop resumes it
        self.drain_waiters: Deque["asyncio.Future[None]"] = collections.deque()
        self.done: "asyncio.Future[None]" = loop.create_future()  # no reply will come any more

    def exit_error(self) -> SidecarExitedError:
        raise NotImplementedError

    def abort(self) -> None:
        """Ends the session at once (the process killed, the connection dropped): every call fails."""
        raise NotImplementedError

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_drains()

    def _wake_drains(self) -> None:
        while self.drain_waiters:
            w = self.drain_waiters.popleft()
            if not w.done():
                w.set_result(None)

    def _replies(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            bodies = self.frames.feed(data)
        except FramingError as e:
            # Nothing after it can be read: the session is ended, and every call fails with its end.
            self.broken = True
            if self.logs is not None:
                self.logs.append(f"agui-state client: {e}; the sidecar is killed")
            self.abort()
            return
        for body, text in bodies:
            got = replies(body)
            if text is not None:  # the result's text came as the frame's attachment (protocol/README.md §2)
                for reply in got:
                    if isinstance(reply.get("result"), dict):
                        # As bytes to a call that gave its text as bytes (the middleware writes them on as they
                        # are); else as str. The sidecar writes UTF-8: a bad byte would be its bug, and is
                        # replaced rather than lose the reply.
                        reply["result"]["text"] = text if reply.get("id") in self.raw_text else \
                            text.decode("utf-8", "replace")
            self._dispatch(got)

    def _dispatch(self, got: List[Result]) -> None:
        for reply in got:
            fut = self.pending.pop(reply["id"], None)
            # done: its caller was cancelled or timed out, and its finally has not yet run to take it out
            if fut is not None and not fut.done():
                fut.set_result(reply)

    def _finish(self) -> None:
        """No reply will come any more: every pending call fails now, and every later one at once."""
        if self.exited:
            return
        self.exited = True
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(self.exit_error())
        self._wake_drains()
        self.done.set_result(None)

    @staticmethod
    def _expire(fut: "asyncio.Future[Result]") -> None:
        if not fut.done():
            fut.set_exception(asyncio.TimeoutError())

    async def call(self, msg_id: int, method: str, params: Mapping[str, Any], timeout: Optional[float]) -> Any:
        # A request body handed over whole (openStream's and rejoinStream's `request`) may be tens of MiB: its
        # frame is encoded in a worker thread, so that the event loop is not held meanwhile (issue 39).
        line = await asyncio.to_thread(frame, msg_id, method, params) if _large(params) else \
            frame(msg_id, method, params)
        if self.exited:
            raise self.exit_error()
        fut: "asyncio.Future[Result]" = self.loop.create_future()
        self.pending[msg_id] = fut
        if method == "fixStream" and isinstance(params.get("text"), bytes):
            self.raw_text.add(msg_id)
        timer = None if timeout is None else self.loop.call_later(timeout, self._expire, fut)
        try:
            # write() queues the whole request at once, so a caller cancelled while it waits for room leaves no
            # half message behind: the request goes, and its late reply is dropped. A writer that is gone
            # drops it: the end of the replies then fails this call.
            self.writer.write(line)
            if self.paused and not self.exited:
                waiter: "asyncio.Future[None]" = self.loop.create_future()
                self.drain_waiters.append(waiter)
                await waiter
            reply = await fut
        finally:
            if timer is not None:
                timer.cancel()
            self.pending.pop(msg_id, None)
            self.raw_text.discard(msg_id)
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved, so that asyncio does not log it as never retrieved
        if "error" in reply:
            raise error_from_reply(reply["error"])
        return reply.get("result")


# Characters of a request body past which its call's frame is encoded off the event loop.
_ENCODE_OFF_LOOP = 1 << 20


def _large(params: Mapping[str, Any]) -> bool:
    """Whether params carry a request body (protocol/README.md §14, §16) long enough to encode off the loop."""
    request = params.get("request")
    body = request.get("body") if isinstance(request, Mapping) else None
    return isinstance(body, str) and len(body) > _ENCODE_OFF_LOOP
