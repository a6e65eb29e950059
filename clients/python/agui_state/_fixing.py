"""The moving part of agui_state.asgi: a response body on its way through the sidecar's stream methods
(protocol/README.md §14), on a new sidecar when the old one dies, failing open."""
from __future__ import annotations

import asyncio
import codecs
import json
import logging
import re
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional

from ._async import AsyncAguiState
from ._detach import Detach, RunCancelled
from ._errors import SidecarExitedError, UnknownStreamError
from ._sidecar import SharedSidecar, log
from ._tasks import Tasks

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

# The end of an SSE event: a blank line, i.e. two line ends, each CRLF, LF or CR (HTML Standard, "Interpreting
# an event stream"). A CR ends a line only when we can see that no LF follows it, so a part never stops
# between the CR and the LF of one line end.
_BLANK_LINE = re.compile(r"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?=[^\n]))")
_BATCH = 1 << 20       # characters per fixStream call at most: far below the sidecar's message limit (§7)
_HIGH_WATER = 1 << 20  # characters waiting for the sidecar before the app's send waits
# After the sidecar dies mid-response, a new one is started and the stream opened on it again, at most this
# many times per response; past that the rest goes through unrepaired (a sidecar that keeps dying, say on
# this very stream, is not started without end).
_RESTARTS = 2
# The text of a response answered for so far is kept up to this many characters, to be fed again to a new
# sidecar after a restart (its output dropped), which so comes to the very mirror the old one had. Past it,
# only the response's first event is kept, and a restart starts from the request's state (README §14).
_REPLAY_LIMIT = 8 * 1024 * 1024
_OUTCOMES = ("passed", "mended", "discarded", "kept")
# @ag-ui/client 1.0.0 fails the run once its SSE parser holds this many UTF-16 code units without an event's
# end; the sidecar passes such an event, and the rest of the stream, on as they came (protocol/README.md §13,
# SSE_BUFFER_LIMIT). Held here past it, an event that never ends would grow the app's process without end.
_CLIENT_LIMIT = 10 * 1024 * 1024


class _Raw(str):
    """Queued text that goes out as it came, and after which the whole response does: the held part of an
    event that passed _CLIENT_LIMIT."""


class FixedBody(Detach):
    """A response body on its way through fixStream. The app's send hands each chunk over and returns;
    a task of the stream's own sends what waits to the sidecar, all of it in one call, and the repaired
    text on to the client. So one event at a time costs one round trip, and a fast app's events share
    their calls. Only whole events go to the sidecar, so when it fails, what it has not answered for is
    exactly what is still here, and goes out as it came. When the sidecar dies, that text goes to a new
    one instead, on the stream opened again there (_connect)."""

    def __init__(self, sidecar: SharedSidecar, send: Send, path: str, framing: str,
                 state: Optional[Dict[str, Any]], policy: Dict[str, Any], tasks: Tasks,
                 resume: Optional[Dict[str, Any]] = None, cancel_app: Optional[Callable[[], None]] = None) -> None:
        self.sidecar, self.send, self.path, self.framing = sidecar, send, path, framing
        self.tasks = tasks  # the exchange's: the pump and the closeStream calls are its
        self.state, self.policy = state, policy
        # Resume (protocol/README.md §16): openStream's `resume`, the run's handle once filed (None: not
        # resumable), and the detach: the client left (left), the sidecar was told (detached), how often to
        # ask it whether to cancel (poll, seconds), and what cancels the app.
        self.resume, self.cancel_app = resume, cancel_app
        self.run: Optional[str] = None
        # openStream's opening block (§16): the run's id number 0 alone, written right after the response's
        # head (send_opening), before the app's first event. Only the first stream's: one opened again on a
        # new sidecar starts a new run, whose opening the client never needs (it has the first).
        self.opening_block: Optional[str] = None
        # openStream's `headers` (§16): what the response's head gets (the announcement). The first stream's.
        self.headers: Dict[str, str] = {}
        self.left = self.detached = False
        self.poll = 0.0
        self.released = asyncio.Event()  # the run is over for the app: ended, cancelled or abandoned
        self.client: Optional[AsyncAguiState] = None
        self.generation = 0  # the sidecar's process that `client` talked to (SharedSidecar.generation)
        self.id: Optional[str] = None  # None: no stream on the sidecar (not opened, failed, or let go): raw
        self.answered: Optional[List[str]] = []  # the text answered for, to replay; None past _REPLAY_LIMIT
        self.answered_chars = 0
        self.run_started: Optional[str] = None  # the response's first event if it is its RUN_STARTED, once answered for
        self.restarts = 0
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
        self.idle = asyncio.Event()  # the pump waits for text, with nothing queued: what the app wrote went out
        self.error: Optional[BaseException] = None
        self.pump: "asyncio.Future[None]" = tasks.start(self._pump())

    @property
    def raw(self) -> bool:
        return self.id is None

    @classmethod
    async def open(cls, sidecar: SharedSidecar, send: Send, path: str, framing: str,
                   state: Optional[Dict[str, Any]], policy: Dict[str, Any], tasks: Tasks,
                   resume: Optional[Dict[str, Any]] = None,
                   cancel_app: Optional[Callable[[], None]] = None) -> "FixedBody":
        """The body of a response whose request held `state`, repaired with `policy` (open_stream's
        keywords), filed as a resumable run with `resume`; passed on as it comes if the stream cannot be
        opened."""
        stream = cls(sidecar, send, path, framing, state, policy, tasks, resume, cancel_app)
        await stream._connect(None, "openStream")
        return stream

    def _gone(self) -> Optional[SidecarExitedError]:
        """Why the process this stream was opened on can no longer be called (another stream found it dead,
        or it has been replaced), or None. The AsyncAguiState object outlives restart(), and a stream id of
        the old process may name another stream on the new one, so each call first asks this; nothing is
        awaited between this and the call's write."""
        if self.sidecar.ready and self.generation == self.sidecar.generation:
            return None
        return SidecarExitedError(None)

    async def _connect(self, died: Optional[SidecarExitedError], during: str) -> bool:
        """Opens the stream on the sidecar: at the start (`died` None), or on a new sidecar after the one
        it was on died, with the text answered for so far fed to it again and its output dropped, so that
        it goes on from where the client is (protocol/README.md §14, after a sidecar restart). False: it
        failed open, and the rest of the response goes as it comes."""
        while True:
            if died is not None and self.detached:
                self.sidecar.died(self.generation, died)
                self.id = None  # the run's client is gone, and its log with a memory store: it is cancelled
                return False
            if died is not None:
                self.sidecar.died(self.generation, died)
                if self.restarts == _RESTARTS:
                    self.id = None
                    log.warning("%s: agui-state sidecar died %d times during this response; the rest of it goes "
                                "through unrepaired", self.path, _RESTARTS + 1)
                    return False
                self.restarts += 1
            try:
                self.client = await self.sidecar.get()
                self.generation = self.sidecar.generation
                opened = await self._open()
                self.id, self.run = opened["streamId"], opened.get("run")
                if died is None:
                    self.opening_block, self.headers = opened.get("opening"), opened.get("headers") or {}
                if died is not None:
                    replayed = await self._replay()
                    log.warning("%s: the stream resumes on the new agui-state sidecar, %s", self.path, replayed)
                return True
            except SidecarExitedError as e:
                died = e
            except Exception as e:  # noqa: BLE001 - whatever it is, the response goes out unrepaired
                self._fail(e, during)
                return False

    async def _replay(self) -> str:
        """Feeds the new stream what the old one was answered for (or, past _REPLAY_LIMIT, its
        RUN_STARTED only), dropping its output: the client has had it. Says what the stream starts from."""
        async def feed(text: str) -> None:
            assert self.client is not None and self.id is not None
            gone = self._gone()
            if gone is not None:
                raise gone  # the new process died too, and may have been replaced already
            await self.client.fix_stream(self.id, text)

        if self.answered is not None:
            parts: List[str] = []
            size = 0
            for part in self.answered + [""]:  # joined up to _BATCH per call, as _take does; "" ends it
                if parts and (size + len(part) > _BATCH or not part):
                    await feed("".join(parts))
                    parts, size = [], 0
                if part:
                    parts.append(part)
                    size += len(part)
            return f"its mirror rebuilt from the {self.answered_chars} characters answered for"
        if self.run_started:
            await feed(self.run_started)
        return (f"from the request's state and the response's first event: more than {_REPLAY_LIMIT} "
                f"characters had been answered for")

    def _answered(self, text: str, result: Dict[str, Any]) -> None:
        """`text` was answered for by `result`: kept to replay, and its findings said."""
        if self.run_started is None and text:
            self.run_started = _first_run_started(text, self.framing)
        if self.answered is not None:
            if self.answered_chars + len(text) <= _REPLAY_LIMIT:
                self.answered.append(text)
                self.answered_chars += len(text)
            else:
                self.answered, self.answered_chars = None, 0
        found = [f"{result.get(o, 0)} {o}" for o in _OUTCOMES if result.get(o, 0)]
        if found:
            log.info("%s: agui-state findings: %s", self.path, ", ".join(found))
        self._each_finding(result)

    def _each_finding(self, result: Dict[str, Any]) -> None:
        """Each finding of a fixStream or closeStream reply, one DEBUG line apiece, as proxy's debug lines
        are (protocol/README.md §13, §14): every op the repair sent rewritten or left out, with its
        outcome. JSON with every non-ASCII character escaped: the pointers and messages are the app's."""
        if log.isEnabledFor(logging.DEBUG):
            for finding in result.get("findings") or ():
                log.debug("%s: agui-state finding: %s", self.path,
                          json.dumps(finding, ensure_ascii=True, separators=(",", ":")))

    def _fail(self, e: BaseException, during: str) -> None:
        if isinstance(e, asyncio.TimeoutError):  # hung: it is ended, and has nothing left to close
            self.id = None
            self.sidecar.hung(self.generation, self.path, during, "this response goes on unrepaired from here")
            return
        if isinstance(e, SidecarExitedError):
            self.sidecar.died(self.generation, e)
        elif self.id is not None and not isinstance(e, UnknownStreamError):
            self._close_later(self.id)
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
            await asyncio.wait({self.pump})  # an app cancelled here leaves the pump to the exchange's close()
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
            self.idle.clear()
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
        while self.client is not None and self.id is not None:
            gone = self._gone()
            if gone is not None:
                if await self._connect(gone, "fixStream"):
                    continue
                break
            try:
                result = await self.client.fix_stream(self.id, text)
            except SidecarExitedError as e:
                if await self._connect(e, "fixStream"):
                    continue  # the text the old sidecar never answered for goes to the new one
                break
            except Exception as e:  # noqa: BLE001 - fail open
                self._fail(e, "fixStream")
                break
            self._answered(text, result)
            if self.detached and result.get("cancel"):
                self._cancel_run("")  # the grace passed with nobody reading the run
                return ""
            return str(result["text"])
        return text

    async def _close(self) -> Optional[Dict[str, Any]]:
        """closeStream, on a new sidecar if the old one died; None when it failed open."""
        while self.client is not None and self.id is not None:
            gone = self._gone()
            if gone is not None:
                if await self._connect(gone, "closeStream"):
                    continue
                break
            try:
                closed: Dict[str, Any] = await self.client.close_stream(self.id)
            except SidecarExitedError as e:
                if await self._connect(e, "closeStream"):
                    continue
                break
            except Exception as e:  # noqa: BLE001 - fail open
                self._fail(e, "closeStream")
                break
            self.id = None
            return closed
        return None

    async def _let_go(self) -> str:
        """An event passed _CLIENT_LIMIT: the sidecar's stream is closed (it was sent whole events only, so
        it holds nothing; whatever text it gives back goes first), and the rest of the response goes out
        as it came, as the sidecar itself would send it."""
        assert self.client is not None and self.id is not None
        stream_id, self.id = self.id, None
        if self._gone() is not None:
            return ""  # that process is gone: there is nothing to close
        log.warning("%s: an event passed %d MiB without its end (the client's SSE limit); the rest of this "
                    "response goes through unrepaired", self.path, _CLIENT_LIMIT >> 20)
        try:
            return str((await self.client.close_stream(stream_id))["text"])
        except asyncio.TimeoutError:
            self.sidecar.hung(self.generation, self.path, "closeStream", "this response goes on unrepaired")
        except Exception as e:  # noqa: BLE001 - fail open: nothing was held there
            log.debug("closeStream %s after an event passed the limit: %s", stream_id, e)
            return ""

    async def _pump(self) -> None:
        send = self.send
        try:
            while self.queue or not self.ending:
                if self.left and not self.detached:
                    await self._detach()
                if self.closed:
                    return  # the run was cancelled
                if not self.queue:
                    self.wake.clear()
                    self.idle.set()
                    if not self.detached:
                        await self.wake.wait()
                    elif not await self._wait_or_poll():
                        return
                    continue
                text = self._take()
                if isinstance(text, _Raw) and not self.raw:
                    text = await self._let_go() + text
                out = text if self.raw else await self._fix(text)
                if self.detached and (self.closed or self.raw):
                    if not self.closed:
                        self._cancel_run("the sidecar could not keep the run")
                    return
                if out and not self.left:
                    try:
                        await send({"type": "http.response.body", "body": out.encode("utf-8"), "more_body": True})
                    except Exception:  # noqa: BLE001 - a resumable run goes on without its client
                        if not self.client_left():
                            raise
            last = self.tail
            if last and not self.raw:
                last = await self._fix(self.tail)
            if self.closed:
                return
            if not self.raw:
                closed = await self._close()
                if closed is None:  # fail open: the end that was not answered for goes as it came
                    last = last or self.tail
                else:
                    last += closed["text"]
                    self._each_finding(closed)
                    summary = closed["summary"]
                    changed = any(summary.get(o) for o in _OUTCOMES)
                    log.log(logging.INFO if changed else logging.DEBUG, "%s: event stream fixed: %s", self.path,
                            summary)
            self.closed = True
            self.released.set()
            if not self.left:
                await send({"type": "http.response.body", "body": last.encode("utf-8"), "more_body": False})
        except Exception as e:  # noqa: BLE001 - the client's connection failed: the app's next send says so
            self.error = e
            self.abandon()
            self.room.set()

    def abandon(self) -> None:
        """The response will not end normally (the client went away, or the app stopped): stop, and let
        the sidecar forget the stream (a resumable run ends as broken off)."""
        if self.closed:
            return
        self.closed = True
        self.released.set()
        self.room.set()
        if self.pump is not asyncio.current_task():
            self.pump.cancel()
        if self.id is not None:
            self._close_later(self.id, broken=self.run is not None)
            self.id = None

    def _close_later(self, stream_id: str, broken: bool = False) -> None:
        client, generation, sidecar, path = self.client, self.generation, self.sidecar, self.path
        if client is None:
            return

        async def close() -> None:
            if not sidecar.ready or sidecar.generation != generation:
                return  # that process is gone, and the id may name another stream on its successor
            try:
                await client.close_stream(stream_id, broken=broken)
            except asyncio.TimeoutError:
                sidecar.hung(generation, path, "closeStream", "the response had ended")
            except Exception as e:  # noqa: BLE001 - a dead sidecar forgot it anyway, and an idle limit holds
                log.debug("closeStream %s after a disconnect: %s", stream_id, e)

        self.tasks.start(close(), finish=True)  # awaited on the way out, not cancelled: the sidecar forgets it


def _first_run_started(text: str, framing: str) -> str:
    """The first event of a response that starts `text` (whole events only), if it starts a run: what a
    stream opened again past _REPLAY_LIMIT is fed, so that the rest of the run is read as one."""
    end = -1
    if framing == "ndjson":
        at = 0
        for line in text.splitlines(keepends=True):
            at += len(line)
            if line.strip():
                end = at
                break
    else:
        for m in _BLANK_LINE.finditer(text):
            if text[:m.start()].strip():
                end = m.end()
                break
    first = text[:end] if end >= 0 else ""
    return first if '"RUN_STARTED"' in first else ""
