"""The moving parts of agui_state.asgi: the sidecar the middleware shares, and a response body on its way
through the sidecar's stream methods (protocol/README.md §14), failing open."""
from __future__ import annotations

import asyncio
import codecs
import logging
import re
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Set

from ._async import AsyncAguiState
from ._errors import SidecarExitedError, UnknownStreamError

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("agui_state.asgi")

# The end of an SSE event: a blank line, i.e. two line ends, each CRLF, LF or CR (HTML Standard, "Interpreting
# an event stream"). A CR ends a line only when we can see that no LF follows it, so a part never stops
# between the CR and the LF of one line end.
_BLANK_LINE = re.compile(r"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?=[^\n]))")
_BATCH = 1 << 20       # characters per fixStream call at most: far below the sidecar's message limit (§7)
_HIGH_WATER = 1 << 20  # characters waiting for the sidecar before the app's send waits
_CALL_TIMEOUT = 30.0   # seconds per call on the sidecar this module starts: a hung sidecar fails open too
# @ag-ui/client 1.0.0 fails the run once its SSE parser holds this many UTF-16 code units without an event's
# end; the sidecar passes such an event, and the rest of the stream, on as they came (protocol/README.md §13,
# SSE_BUFFER_LIMIT). Held here past it, an event that never ends would grow the app's process without end.
_CLIENT_LIMIT = 10 * 1024 * 1024


class _Raw(str):
    """Queued text that goes out as it came, and after which the whole response does: the held part of an
    event that passed _CLIENT_LIMIT."""

_background: Set["asyncio.Task[None]"] = set()  # closeStream calls nobody waits for, kept from the collector


class SharedSidecar:
    """The sidecar a middleware uses: the caller's, or the one of the whole process. Started on the first
    stream, and started again on the next one after it died."""

    def __init__(self, given: Optional[AsyncAguiState]) -> None:
        self.client, self.given = given, given is not None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.ready = self.dead = False
        self.starting: Optional["asyncio.Task[None]"] = None

    async def get(self) -> AsyncAguiState:
        loop = asyncio.get_running_loop()
        if self.loop is not loop:  # an AsyncAguiState belongs to its loop: a new loop needs its own process
            self.loop, self.starting, self.ready = loop, None, False
            if not self.given:
                self.client = None
        while not self.ready:
            if self.starting is None:
                self.starting = loop.create_task(self._start())
                self.starting.add_done_callback(lambda t: t.cancelled() or t.exception())
            starting = self.starting
            try:
                await asyncio.shield(starting)  # one start for every request that waits for it
            finally:
                if starting.done() and self.starting is starting:
                    self.starting = None
        assert self.client is not None
        return self.client

    async def _start(self) -> None:
        if self.client is None:
            self.client = AsyncAguiState(timeout=_CALL_TIMEOUT)
        if self.dead or not started(self.client):
            await self.client.restart()  # on an instance never started, restart() starts it
        self.dead, self.ready = False, True

    def died(self, client: AsyncAguiState) -> None:
        if client is self.client and self.ready:
            self.ready, self.dead = False, True
            log.warning("agui-state sidecar died; the next response starts a new one")

    async def close(self) -> None:
        """At the server's shutdown: close the process this module started (never the caller's)."""
        if not self.given and self.client is not None and self.ready:
            client, self.client, self.ready = self.client, None, False
            await client.close()


def started(client: AsyncAguiState) -> bool:
    try:
        client.pid  # raises RuntimeError on an instance that was never started
        return True
    except RuntimeError:
        return False


PROCESS = SharedSidecar(None)


class FixedBody:
    """A response body on its way through fixStream. The app's send hands each chunk over and returns;
    a task of the stream's own sends what waits to the sidecar, all of it in one call, and the repaired
    text on to the client. So one event at a time costs one round trip, and a fast app's events share
    their calls. Only whole events go to the sidecar, so when it fails, what it has not answered for is
    exactly what is still here, and goes out as it came."""

    def __init__(self, sidecar: SharedSidecar, send: Send, path: str, framing: str,
                 client: Optional[AsyncAguiState], stream_id: Optional[str]) -> None:
        self.sidecar, self.send, self.path, self.framing = sidecar, send, path, framing
        self.client, self.id = client, stream_id
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")  # as the client's TextDecoder
        self.held: List[str] = []  # decoded text after the last whole event
        self.held_chars = 0        # its length in code points: never more than in UTF-16 code units
        self.passing = False       # an event passed _CLIENT_LIMIT: from it on, the text goes as it came
        self.edge = ""             # the last characters of held: a blank line may start there
        self.queue: List[str] = []
        self.queued = 0
        self.tail = ""             # at the end: the text after the last whole event
        self.ending = self.closed = False  # closed: ended, or abandoned
        self.wake, self.room = asyncio.Event(), asyncio.Event()
        self.room.set()
        self.error: Optional[BaseException] = None
        self.pump: "asyncio.Task[None]" = asyncio.get_running_loop().create_task(self._pump())

    @property
    def raw(self) -> bool:
        return self.id is None

    @classmethod
    async def open(cls, sidecar: SharedSidecar, send: Send, path: str, framing: str,
                   state: Optional[Dict[str, Any]], policy: Dict[str, Any]) -> "FixedBody":
        """The body of a response whose request held `state`, repaired with `policy` (open_stream's
        keywords); passed on as it comes if the stream cannot be opened."""
        client: Optional[AsyncAguiState] = None
        try:
            client = await sidecar.get()
            opened = await client.open_stream(state=state, framing=framing, **policy)
            stream = cls(sidecar, send, path, framing, client, opened["streamId"])
        except Exception as e:  # noqa: BLE001 - whatever it is, the response goes out unrepaired
            stream = cls(sidecar, send, path, framing, client, None)
            stream._fail(e, "openStream")
        return stream

    def _fail(self, e: BaseException, during: str) -> None:
        if isinstance(e, SidecarExitedError) and self.client is not None:
            self.sidecar.died(self.client)
        elif self.id is not None and not isinstance(e, UnknownStreamError):
            self._close_later(self.client, self.id)
        self.id = None
        log.warning("%s: agui-state %s failed (%s: %s); the rest of this response goes through unrepaired",
                    self.path, during, type(e).__name__, e)

    async def body(self, chunk: bytes, more: bool) -> None:
        if self.error is not None:
            raise self.error
        if self.closed:  # abandoned: the client is gone, and the server drops what is sent to it then
            return
        text = self.decoder.decode(chunk, final=not more)
        if not more:
            self.tail, ready = "".join(self.held) + text, ""
            if not self.raw and not self.passing:
                cut = max(self._boundary(self.tail), 0)
                ready, self.tail = self.tail[:cut], self.tail[cut:]
            self._queue(ready)
            self.ending = True
            self.wake.set()
            await asyncio.wait({self.pump})  # an app cancelled here leaves the pump to finish()
            if self.error is not None:
                raise self.error
            return
        if self.raw or self.passing:
            ready = "".join(self.held) + text
            self.held = []
        else:
            window = self.edge + text
            cut = self._boundary(window)
            if cut < 0:
                ready = ""
                self.held.append(text)
                self.held_chars += len(text)
                self.edge = window[-3:]
            else:
                # A match wholly inside edge was seen before, but for a CR the new text shows to end a line.
                cut = max(0, cut - len(self.edge))
                ready = "".join(self.held) + text[:cut]
                self.held = [text[cut:]]
                self.held_chars = len(text) - cut
                self.edge = text[cut:][-3:]  # only text after the event's end: no blank line is sought before it
            if self.held_chars > _CLIENT_LIMIT:
                self._queue(ready)
                ready = _Raw("".join(self.held))
                self.held, self.passing = [], True
        self._queue(ready)
        if self.queued > _HIGH_WATER:
            self.room.clear()
            await self.room.wait()
            if self.error is not None:
                raise self.error

    def _queue(self, text: str) -> None:
        if text:
            self.queue.append(text)
            self.queued += len(text)
            self.wake.set()

    def _boundary(self, text: str) -> int:
        """Where the last whole event in `text` ends, or -1."""
        if self.framing == "ndjson":
            nl = text.rfind("\n")
            return -1 if nl < 0 else nl + 1
        if text.endswith("\n\n"):
            return len(text)
        end = -1
        for m in _BLANK_LINE.finditer(text):
            end = m.end()
        return end

    def _take(self) -> str:
        """The next text for one fixStream call: queued parts joined up to _BATCH, a _Raw part alone."""
        first = self.queue[0]
        n, size = 1, len(first)
        while (n < len(self.queue) and not isinstance(first, _Raw) and not isinstance(self.queue[n], _Raw)
               and size + len(self.queue[n]) <= _BATCH):
            size += len(self.queue[n])
            n += 1
        text = first if n == 1 else "".join(self.queue[:n])  # one part is returned as it is: _Raw stays _Raw
        del self.queue[:n]
        self.queued -= size
        if self.queued <= _HIGH_WATER:
            self.room.set()
        return text

    async def _fix(self, text: str) -> str:
        assert self.client is not None and self.id is not None
        try:
            return str((await self.client.fix_stream(self.id, text))["text"])
        except Exception as e:  # noqa: BLE001 - fail open
            self._fail(e, "fixStream")
            return text

    async def _let_go(self) -> str:
        """An event passed _CLIENT_LIMIT: the sidecar's stream is closed (it was sent whole events only, so
        it holds nothing; whatever text it gives back goes first), and the rest of the response goes out
        as it came, as the sidecar itself would send it."""
        assert self.client is not None and self.id is not None
        stream_id, self.id = self.id, None
        log.warning("%s: an event passed %d MiB without its end (the client's SSE limit); the rest of this "
                    "response goes through unrepaired", self.path, _CLIENT_LIMIT >> 20)
        try:
            return str((await self.client.close_stream(stream_id))["text"])
        except Exception as e:  # noqa: BLE001 - fail open: nothing was held there
            log.debug("closeStream %s after an event passed the limit: %s", stream_id, e)
            return ""

    async def _pump(self) -> None:
        send = self.send
        try:
            while self.queue or not self.ending:
                if not self.queue:
                    self.wake.clear()
                    await self.wake.wait()
                    continue
                text = self._take()
                if isinstance(text, _Raw) and not self.raw:
                    text = await self._let_go() + text
                out = text if self.raw else await self._fix(text)
                if out:
                    await send({"type": "http.response.body", "body": out.encode("utf-8"), "more_body": True})
            last = self.tail
            if last and not self.raw:
                last = await self._fix(self.tail)
            if not self.raw:
                assert self.client is not None and self.id is not None
                try:
                    closed = await self.client.close_stream(self.id)
                    last += closed["text"]
                    log.debug("%s: event stream fixed: %s", self.path, closed["summary"])
                except Exception as e:  # noqa: BLE001 - fail open: the end that was not answered for goes as it came
                    self._fail(e, "closeStream")
                    last = last or self.tail
                self.id = None
            self.closed = True
            await send({"type": "http.response.body", "body": last.encode("utf-8"), "more_body": False})
        except Exception as e:  # noqa: BLE001 - the client's connection failed: the app's next send says so
            self.error = e
            self.abandon()
            self.room.set()

    def abandon(self) -> None:
        """The response will not end normally (the client went away, or the app stopped): stop, and let
        the sidecar forget the stream."""
        if self.closed:
            return
        self.closed = True
        self.room.set()
        if self.pump is not asyncio.current_task():
            self.pump.cancel()
        if self.id is not None:
            self._close_later(self.client, self.id)
            self.id = None

    @staticmethod
    def _close_later(client: Optional[AsyncAguiState], stream_id: str) -> None:
        if client is None:
            return

        async def close() -> None:
            try:
                await client.close_stream(stream_id)
            except Exception as e:  # noqa: BLE001 - a dead sidecar forgot it anyway, and an idle limit holds
                log.debug("closeStream %s after a disconnect: %s", stream_id, e)

        task = asyncio.get_running_loop().create_task(close())
        _background.add(task)
        task.add_done_callback(_background.discard)
