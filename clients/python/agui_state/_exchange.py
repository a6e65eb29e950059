"""One handled request of agui_state.asgi and its response (protocol/README.md §14): the body handed to the
app as it arrives with a copy kept (BodyTap), the app in a task of its own, and the response head given to
openStream with the raw request, then written as the sidecar says: repaired (Repair) or as it came."""
from __future__ import annotations

import asyncio
import collections
from typing import Any, Awaitable, Callable, Deque, Dict, List, MutableMapping, Optional, Tuple

from ._body import BodyTap
from ._fixing import Repair, RunCancelled
from ._lifecycle import Event, Lifecycle, Phase
from ._rejoin import header_pairs, target
from ._sidecar import SharedSidecar, log
from ._tasks import Tasks

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Exchange:
    """One request and its response, from classifyRequest's `forward` on. `options` are openStream's (own,
    snapshots, join_keys, resume) as the middleware was given them."""

    def __init__(self, app: ASGIApp, sidecar: SharedSidecar, options: Dict[str, Any], body_bytes: int,
                 scope: Scope, receive: Receive, send: Send) -> None:
        self.app, self.sidecar, self.options = app, sidecar, options
        self.scope, self.down_receive, self.down_send = scope, receive, send
        self.life = Lifecycle()
        self.replay: Deque[Message] = collections.deque()  # body messages read ahead at the head, the app's next
        self.tap = BodyTap(body_bytes)
        self.pulling = asyncio.Lock()  # one read of the body from the server at a time: the app's or the head's
        self.repair: Optional[Repair] = None
        self.tasks = Tasks()  # every task started for this exchange, cancelled and awaited by close()
        self.next: Optional["asyncio.Future[Message]"] = None  # the one read past the request (http.disconnect)
        self.app_task: Optional["asyncio.Future[None]"] = None
        self.cancelled = False  # the middleware cancelled the app: its client left

    async def run(self) -> None:
        """The app, in a task of its own, which a run's cancel cancels: the app may be silent then, and a write
        that fails would never come. Its own outcome, error or cancel, goes up as it would without us; except
        an error mid-stream after which the sidecar ended the run (issue 40): the client has a whole run then."""
        try:
            task = self.app_task = self.tasks.start(self.app(self.scope, self.receive, self.send))
            await asyncio.wait({task})  # cancelled (the server cancelled this request): close() cancels the app
            if self.cancelled and (task.cancelled() or isinstance(task.exception(), RunCancelled)):
                return  # our cancel: the client is gone, and the response with it
            error = None if task.cancelled() else task.exception()
            if self.repair is not None and error is not None:
                await self.repair.settle()  # the app raised: what it wrote goes out before the run breaks off
                if await self._broke(error):
                    return  # the sidecar ended the run, and the response is ended: the client has it whole
            task.result()
        finally:
            if self.repair is not None:
                self.repair.abandon()  # a no-op once the response has ended
            self.life.on(Event.ENDED)
            await self.tasks.close()

    async def _broke(self, e: BaseException) -> bool:
        """The app raised mid-response: closeStream (broken) and its text written (§14). True when that text
        ended the run (closeStream's `ended`, issue 40: its closes and a RUN_ERROR with code INCOMPLETE_STREAM):
        the response is then ended cleanly and the app's error said once here, not raised to the server (which
        would log a traceback for a run the client got whole). False: it breaks off, as before."""
        assert self.repair is not None
        out, ended = await self.repair.close_broken()
        writing = self.life.writing
        self.repair.abandon()  # the stream is closed: this ends the lifecycle only
        if writing and (out or ended):
            try:
                await self.down_send({"type": "http.response.body", "body": out, "more_body": not ended})
            except Exception:  # noqa: BLE001 - the client is gone: the app's error goes up, as before
                return False
        if ended:
            log.warning("%s: the app raised mid-stream (%s: %s); the run was ended with a RUN_ERROR "
                        "(INCOMPLETE_STREAM)", self.scope.get("path", ""), type(e).__name__, e)
        return ended

    def _cancel_app(self) -> None:
        self.cancelled = True
        if self.app_task is not None:
            self.app_task.cancel()

    # The request side.

    async def _pull(self) -> None:
        """The body's next message from the server, into `replay` (the app gets each in order) and the tap."""
        async with self.pulling:
            if not self.tap.ended.is_set():
                message = await self.down_receive()
                self.tap.take(message)
                self.replay.append(message)

    def _downstream(self) -> "asyncio.Future[Message]":
        """The server's next message past the request body: for HTTP only http.disconnect comes, so the app
        and the middleware's watch share this one read."""
        if self.next is None or (self.next.done() and not self.next.cancelled() and self.next.exception() is None
                                 and self.next.result()["type"] != "http.disconnect"):
            self.next = self.tasks.start(self.down_receive())
        return self.next

    async def receive(self) -> Message:
        while not self.replay and not self.tap.ended.is_set():
            await self._pull()
        if self.replay:
            return self.replay.popleft()
        message = await asyncio.shield(self._downstream())
        if message["type"] == "http.disconnect" and self.repair is not None:
            # A resumable run goes on (detached): the app learns of the disconnect only once the run ends or is
            # cancelled (Starlette cancels a response whose receive says so).
            self.repair.client_left()
            if self.life.phase is Phase.DETACHED:
                await self.repair.released.wait()
        return message

    async def _watch(self) -> None:
        """Sees the client leave while the app does not read (an app that only writes), so that the run is
        detached, or the app cancelled, rather than written into the void. It reads past the body only."""
        await self.tap.ended.wait()
        message = await asyncio.shield(self._downstream())
        if message["type"] == "http.disconnect" and self.repair is not None:
            self.repair.client_left()

    # The response side.

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and self.life.phase is Phase.WAITING:
            headers = await self._open(message)
            if headers is not None:
                await self.down_send({**message, "headers": headers})
                assert self.repair is not None
                await self.repair.write_opening()  # §16: the opening id block, before the app's first event
                self.tasks.start(self._watch())
                return
        elif kind == "http.response.body" and self.repair is not None:
            await self.repair.body(message.get("body", b""), message.get("more_body", False))
            return
        await self.down_send(message)

    async def _open(self, head: Message) -> Optional[List[Tuple[bytes, bytes]]]:
        """openStream with the raw request and the app's response head (§14): the header pairs to write, or
        None when the response goes as the app wrote it. The body not yet read is read on up to the limit
        first (it waits for the app in `replay`): never more than that before the app's first byte."""
        while not self.tap.ended.is_set() and not self.tap.full:
            await self._pull()
        request: Dict[str, Any] = {"method": self.scope.get("method", "GET"), "path": target(self.scope),
                                   "headers": header_pairs(self.scope.get("headers", ()))}
        body = await self.tap.text()
        if body is not None:
            request["body"] = body
        self.tap.chunks = []  # what it was kept for is done
        response = {"status": head["status"], "headers": header_pairs(head.get("headers", ()))}
        repair = Repair(self.sidecar, self.down_send, self.scope.get("path", ""), self.life, self.tasks,
                        self._cancel_app, {**self.options, "request": request, "response": response})
        headers = await repair.open()
        if headers is not None:
            self.repair = repair
        return headers
