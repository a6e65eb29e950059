"""The moving part of agui_state.asgi: a response body on its way through the sidecar's stream methods
(protocol/README.md §14), on a new sidecar when the old one dies, failing open, and detached when the client
of a resumable run leaves (§16). Each move of the request's lifecycle (_lifecycle.py) is made here or in the
exchange (asgi.py), never decided from anything but the sidecar's replies."""
from __future__ import annotations

import asyncio
import collections
import json
import logging
from typing import Any, Awaitable, Callable, Deque, Dict, List, MutableMapping, Optional, Tuple

from ._async import AsyncAguiState
from ._errors import SidecarExitedError, UnknownStreamError
from ._kept import Kept
from ._lifecycle import Event, Lifecycle, Phase
from ._sidecar import SharedSidecar, log
from ._tasks import Tasks
from ._utf8 import Utf8Parts

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]

_BATCH = 1 << 20       # bytes per fixStream call at most: far below the sidecar's message limit (§7)
_HIGH_WATER = 1 << 20  # bytes waiting for the sidecar before the app's send waits
# After the sidecar dies mid-response, a new one is started and the stream opened on it again, at most this
# many times per response; past that the rest goes through unrepaired (§14: a dead sidecar cannot decide it).
_RESTARTS = 2
_OUTCOMES = ("passed", "mended", "discarded", "kept")


class RunCancelled(Exception):
    """The app's write after its run was cancelled: the client left and nobody rejoined within the grace."""


class Repair:
    """A response body on its way through fixStream. The app's send queues each chunk and returns; the
    stream's pump sends what waits to the sidecar, joined into one call, and the repaired text on to the
    client: one round trip per event at most, and a fast app's events share their calls. What no reply has
    answered for yet is kept (Kept), so that a failure lets exactly that go out as it came."""

    def __init__(self, sidecar: SharedSidecar, send: Send, path: str, life: Lifecycle, tasks: Tasks,
                 cancel_app: Callable[[], None], params: Dict[str, Any]) -> None:
        self.sidecar, self.send, self.path, self.life = sidecar, send, path, life
        self.tasks, self.cancel_app = tasks, cancel_app  # the exchange's: the pump and closeStream calls are its
        self.params = params  # openStream's, for the stream opened again on a new sidecar
        self.client: Optional[AsyncAguiState] = None
        self.generation = 0  # the sidecar's process that `client` talked to (SharedSidecar.generation)
        self.id: Optional[str] = None  # None: no stream on the sidecar (not opened, failed, or let go)
        self.run: Optional[str] = None  # the run's handle (§16); None: not resumable
        self.opening = ""  # the first stream's id block (§16), written right after the head
        self.kept = Kept(0)
        self.restarts = 0
        self.poll: Optional[float] = None  # detached: seconds between fixStream "" calls, once detachStream said
        self.utf8 = Utf8Parts()  # the app's bytes in whole characters, bad ones replaced as a TextDecoder does
        self.queue: Deque[Optional[bytes]] = collections.deque()  # the app's text (UTF-8), and None for its end
        self.queued = 0
        self.wake, self.room = asyncio.Event(), asyncio.Event()
        self.room.set()
        self.idle = asyncio.Event()  # the pump waits for text, with nothing queued: what the app wrote went out
        self.released = asyncio.Event()  # the run is over for the app: ended, cancelled or abandoned
        self.error: Optional[BaseException] = None
        self.ended = False  # closeStream said `ended`: its text ends the run (issue 40)
        self.pump: Optional["asyncio.Future[None]"] = None

    async def open(self) -> Optional[List[Tuple[bytes, bytes]]]:
        """openStream at the response head: the header pairs to write in place of the app's, with the
        lifecycle moved to repairing; or None, moved to passing (not a stream, or the sidecar failed)."""
        opened = await self._connect(None, "openStream")
        if opened is None:
            self.life.on(Event.PASSED)
            return None
        self.life.on(Event.OPENED)
        self.opening = opened.get("opening") or ""
        self.pump = self.tasks.start(self._pump())
        return [(n.encode("latin-1"), v.encode("latin-1")) for n, v in opened["headers"]]

    def _gone(self) -> Optional[SidecarExitedError]:
        """Why the process this stream was opened on can no longer be called (another stream found it dead,
        or it has been replaced), or None. A stream id of the old process may name another stream on the new
        one, so each call first asks this; nothing is awaited between this and the call's write."""
        if self.sidecar.ready and self.generation == self.sidecar.generation:
            return None
        return SidecarExitedError(None)

    async def _connect(self, died: Optional[SidecarExitedError], during: str) -> Optional[Dict[str, Any]]:
        """Opens the stream on the sidecar: at the head (`died` None), or on a new sidecar after the one it was
        on died, fed what it was answered for so far, its output dropped, so that it goes on from where the
        client is (§14, after a sidecar restart). None: not opened (passed on, failed, or given up)."""
        first = died is None
        while True:
            if died is not None:
                self.sidecar.died(self.generation, died)
                if self.life.phase is Phase.DETACHED:
                    self.id = None  # the run's client is gone, and its log with a memory store: cancel it
                    return None
                if self.restarts == _RESTARTS:
                    self.id = None
                    log.warning("%s: agui-state sidecar died %d times during this response; the rest of it goes "
                                "through unrepaired", self.path, _RESTARTS + 1)
                    return None
                self.restarts += 1
            try:
                self.client = await self.sidecar.get()
                self.generation = self.sidecar.generation
                # Without the replay the new mirror starts at the request's state, which the client has moved
                # past: its owned members are sent whole again (resync, protocol/README.md §13, §14).
                resync = not first and self.kept.answered is None
                opened: Dict[str, Any] = await self.client.open_stream(**self.params, **({"resync": True} if resync else {}))
                if "pass" in opened:
                    self.id = None
                    self._passed(opened["pass"])
                    return None
                self.id, self.run = opened["streamId"], opened.get("run")
                if first:
                    self.kept = Kept(int(opened["replayBytes"]))
                    if opened.get("baseline"):
                        log.warning("%s: %s", self.path, opened["baseline"]["message"])
                    return opened
                for part in self.kept.replay():
                    gone = self._gone()
                    if gone is not None:
                        raise gone  # the new process died too, and may have been replaced already
                    await self._call_fix(part)
                log.warning("%s: the stream resumes on the new agui-state sidecar, %s", self.path, self.kept.said())
                return opened
            except SidecarExitedError as e:
                died = e
            except Exception as e:  # noqa: BLE001 - whatever it is, the response goes out unrepaired
                self._fail(e, during)
                return None

    def _passed(self, why: Dict[str, Any]) -> None:
        """openStream's `pass`: the response is not one to repair, and goes through untouched."""
        level = logging.DEBUG if why.get("code") == "NOT_AN_EVENT_STREAM" else logging.WARNING
        log.log(level, "%s: %s", self.path, why.get("message"))

    def _fail(self, e: BaseException, during: str) -> None:
        """A call failed: the stream is let go (one line says so) and the lifecycle fails open."""
        if isinstance(e, asyncio.TimeoutError):  # hung: it is ended, and has nothing left to close
            self.sidecar.hung(self.generation, self.path, during, "this response goes on unrepaired from here")
        else:
            if isinstance(e, SidecarExitedError):
                self.sidecar.died(self.generation, e)
            elif self.id is not None and not isinstance(e, UnknownStreamError):
                self.sidecar.close_later(self.tasks, self.generation, self.path, self.id)
            log.warning("%s: agui-state %s failed (%s: %s); the rest of this response goes through unrepaired",
                        self.path, during, type(e).__name__, e)
        self.id = None

    def _lost(self) -> bytes:
        """The stream could not go on (`id` is None): repairing fails open with the unanswered tail (§14);
        a detached run is cancelled, since nobody could rejoin it."""
        if self.life.phase is Phase.DETACHED:
            self._cancel_run("the sidecar could not keep the run")
        self.life.on(Event.PASSED)
        return self.kept.take()

    async def _call_fix(self, text: bytes) -> Dict[str, Any]:
        """fixStream with `text` as UTF-8 bytes: a long one goes as the frame's attachment as it is, and its
        reply's text comes back as bytes the same way, written on as they are (_framing.py, §2)."""
        assert self.client is not None and self.id is not None
        result: Dict[str, Any] = await self.client.call("fixStream", {"streamId": self.id, "text": text})
        return result

    async def _fix(self, text: bytes) -> bytes:
        """fixStream of `text` (on a new sidecar if the old one died, the unanswered tail with it): the bytes
        to write, the repaired text, or, failed open, what was not answered for as it came."""
        if self.life.phase is Phase.PASSING:
            return text
        self.kept.sent(text)
        while self.client is not None and self.id is not None:
            try:
                gone = self._gone()
                if gone is not None:
                    raise gone
                result = await self._call_fix(text)
            except SidecarExitedError as e:
                if await self._connect(e, "fixStream") is None:
                    break
                text = self.kept.take()  # what the old sidecar never answered for goes to the new one
                self.kept.sent(text)
                continue
            except Exception as e:  # noqa: BLE001 - fail open
                self._fail(e, "fixStream")
                break
            self.kept.replied(int(result.get("pending", 0)), result.get("head"))
            self._findings(result)
            if result.get("cancel") and self.life.phase is Phase.DETACHED:
                self._cancel_run("")  # the grace passed with nobody reading the run
            repaired = result["text"]  # bytes when it came as the reply's attachment, else str from the JSON
            return repaired if isinstance(repaired, bytes) else str(repaired).encode("utf-8")
        return self._lost()

    def _findings(self, result: Dict[str, Any]) -> None:
        """The findings of a fixStream or closeStream reply: counted at INFO, and each at DEBUG as proxy's
        debug lines are (§13, §14), JSON with every non-ASCII character escaped (they hold the app's text)."""
        found = [f"{result.get(o, 0)} {o}" for o in _OUTCOMES if result.get(o, 0)]
        if found:
            log.info("%s: agui-state findings: %s", self.path, ", ".join(found))
        if log.isEnabledFor(logging.DEBUG):
            for finding in result.get("findings") or ():
                log.debug("%s: agui-state finding: %s", self.path,
                          json.dumps(finding, ensure_ascii=True, separators=(",", ":")))

    async def _close(self, broken: bool = False) -> bytes:
        """closeStream at the app's end, or `broken` at its break (on a new sidecar if the old one died): its
        text, or failed open, the unanswered tail."""
        out = b""
        while self.client is not None and self.id is not None:
            try:
                gone = self._gone()
                if gone is not None:
                    raise gone
                closed: Dict[str, Any] = await self.client.close_stream(self.id, broken=broken)
            except SidecarExitedError as e:
                if await self._connect(e, "closeStream") is not None:
                    out += await self._fix(self.kept.take())
                continue
            except Exception as e:  # noqa: BLE001 - fail open
                self._fail(e, "closeStream")
                break
            self.id, self.ended = None, bool(closed.get("ended"))
            summary = closed["summary"]
            self._findings({"findings": closed["findings"]})
            log.log(logging.INFO if any(summary.get(o) for o in _OUTCOMES) else logging.DEBUG,
                    "%s: event stream fixed: %s", self.path, summary)
            return out + str(closed["text"]).encode("utf-8")
        return out + self._lost()

    # The app's side: its chunks queued for the pump, its end, its error (settle).

    async def body(self, chunk: bytes, more: bool) -> None:
        if self.error is not None:
            raise self.error
        if self.life.phase is Phase.ENDED:  # the client is gone: the server drops what is sent to it then
            return
        if type(chunk) is not bytes:
            chunk = bytes(chunk)  # a bytearray or memoryview: ASGI says bytes, and the parts are kept
        self._queue(self.utf8.part(chunk, final=not more))
        if not more:
            self.queue.append(None)
            self.wake.set()
            assert self.pump is not None
            await asyncio.wait({self.pump})  # an app cancelled here leaves the pump to the exchange's close()
        elif self.queued > _HIGH_WATER:
            self.room.clear()
            await self.room.wait()
        if self.error is not None:
            raise self.error

    def _queue(self, text: bytes) -> None:
        if text:
            self.queue.append(text)
            self.queued += len(text)
            self.idle.clear()
            self.wake.set()

    def _take(self) -> Optional[bytes]:
        """The next text for one fixStream call, queued parts joined up to _BATCH; None: the app's end."""
        parts: List[bytes] = []
        size = 0
        while self.queue:
            part = self.queue[0]
            if part is None:
                if not parts:
                    self.queue.popleft()
                    return None
                break
            if parts and size + len(part) > _BATCH:
                break
            parts.append(self.queue.popleft() or b"")
            size += len(part)
        text = parts[0] if len(parts) == 1 else b"".join(parts)  # one part: that object, not a copy
        self.queued -= size
        if self.queued <= _HIGH_WATER:
            self.room.set()
        return text

    async def settle(self) -> None:
        """The app raised mid-response: every event it wrote goes out first, into the run log and to the
        client, before the stream is abandoned (broken off). So the client holds what the log holds, and its
        rejoin is refused at once rather than answered with the rest and cut again; and it gets what it
        would have got without the middleware."""
        if self.pump is None or self.pump.done():
            return
        idle = asyncio.ensure_future(self.idle.wait())
        try:
            await asyncio.wait({self.pump, idle}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
            await asyncio.wait({idle})

    async def close_broken(self) -> Tuple[bytes, bool]:
        """The app raised mid-response, after settle(): closeStream as broken off (§14). Its text, and whether
        that text ends the run (`ended`, issue 40); the exchange writes it. (b"", False): ended, or failed open."""
        if self.pump is not None and not self.pump.done():
            self.pump.cancel()  # idle (settle): waiting for text that will not come
            await asyncio.wait({self.pump})
        if self.life.phase not in (Phase.REPAIRING, Phase.DETACHED):
            return b"", False
        out = await self._close(broken=True)
        return out, self.ended and self.life.phase is not Phase.PASSING

    # The pump, and what it writes.

    async def _pump(self) -> None:
        try:
            while True:
                if self.life.phase is Phase.DETACHED and self.poll is None:
                    await self._detach()
                if self.life.phase is Phase.ENDED:
                    return  # the run was cancelled
                if not self.queue:
                    self.wake.clear()
                    self.idle.set()
                    await self._wait()
                    continue
                text = self._take()
                if text is None:
                    await self._end()
                    return
                await self._write(await self._fix(text), True)
        except Exception as e:  # noqa: BLE001 - the client's connection failed: the app's next send says so
            self.error = e
            self.abandon()

    async def _wait(self) -> None:
        """For the app's next text; detached, fixStream "" every `poll` seconds meanwhile, for the cancel."""
        if self.life.phase is not Phase.DETACHED or self.poll is None:
            await self.wake.wait()
            return
        try:
            await asyncio.wait_for(self.wake.wait(), self.poll)
        except asyncio.TimeoutError:
            await self._fix(b"")

    async def _end(self) -> None:
        """The app's response ended: closeStream, its text written, and the response ended (§14)."""
        out = await self._close() if self.life.phase is not Phase.PASSING else b""
        writing = self.life.writing
        self.life.on(Event.ENDED)
        self.released.set()
        if writing:
            await self.send({"type": "http.response.body", "body": out, "more_body": False})

    async def _write(self, out: bytes, more: bool) -> None:
        if not out or not self.life.writing:
            return  # detached: the run log has it
        try:
            await self.send({"type": "http.response.body", "body": out, "more_body": more})
        except Exception:  # noqa: BLE001 - a resumable run goes on without its client
            if self.life.phase is Phase.PASSING:
                raise  # the app learns it from its next send, as without the middleware
            self.client_left()

    async def write_opening(self) -> None:
        """Writes the opening block right behind the response's head, so the client holds an id before the
        app's first event, however long that takes. A client already gone is a client that left."""
        block, self.opening = self.opening, ""
        if block:
            await self._write(block.encode("utf-8"), True)

    # The client's side: it left (§14, §16).

    def client_left(self) -> None:
        """The client is gone (its disconnect, or a write to it failed). A resumable run is detached: the app
        goes on, its output to the run log only, until it ends or the sidecar says cancel. Any other stream
        is ended: closed as broken off, and the app cancelled. Passing, the app hears it as it would."""
        if self.life.phase is not Phase.REPAIRING:
            return
        if self.run is not None and self.id is not None and self.life.on(Event.LEFT):
            self.wake.set()
        else:
            self._cancel_run("")

    async def _detach(self) -> None:
        """detachStream: from now on, fixStream's replies say when to cancel. A grace of 0 (or a sidecar that
        cannot be asked) cancels at once."""
        grace = 0
        if self.client is not None and self.id is not None and self._gone() is None:
            try:
                grace = int((await self.client.detach_stream(self.id))["graceMs"])
            except asyncio.TimeoutError:
                self.sidecar.hung(self.generation, self.path, "detachStream", "the run is cancelled")
            except Exception as e:  # noqa: BLE001 - the run cannot go on without the sidecar: cancel it
                log.debug("detachStream %s: %s", self.id, e)
        if grace <= 0:
            self._cancel_run("")
        else:
            self.poll = max(grace / 2000, 0.01)  # the sidecar answers a cancel in a fixStream reply: twice a grace

    def _cancel_run(self, why: str) -> None:
        """The client left and nobody rejoined within the grace (or the run cannot go on, or it was not
        resumable): the stream is closed as broken off, the app is cancelled, and its writes fail."""
        if why:
            log.warning("%s: the client left and %s; the app is cancelled", self.path, why)
        if self.id is not None:
            self.sidecar.close_later(self.tasks, self.generation, self.path, self.id, broken=True)
            self.id = None
        self.life.on(Event.ENDED)
        if self.error is None:
            self.error = RunCancelled("the client left and the run was cancelled")
        self.released.set()
        self.room.set()
        self.cancel_app()

    def abandon(self) -> None:
        """The response will not end normally (the app raised or was cancelled, or the client's connection
        failed): stop, and let the sidecar forget the stream as broken off."""
        if self.life.phase is Phase.ENDED:
            return
        self.life.on(Event.ENDED)
        self.released.set()
        self.room.set()
        if self.pump is not None and self.pump is not asyncio.current_task():
            self.pump.cancel()
        if self.id is not None:
            self.sidecar.close_later(self.tasks, self.generation, self.path, self.id, broken=True)
            self.id = None
