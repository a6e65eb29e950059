"""Resume in agui_state.asgi, the run side (protocol/README.md §16): a response filed as a run, whose client,
if it leaves mid-run, leaves it going on into the sidecar's run log for the grace period, its app cancelled
once the sidecar says nobody rejoined; and whose app, if it raises, has what it wrote go out first. A part of
FixedBody (_fixing.py), which holds the state these methods use."""
from __future__ import annotations

import asyncio
from typing import Any, Dict

from ._errors import InvalidParamsError
from ._sidecar import log

__all__ = ["Detach", "RunCancelled"]


class RunCancelled(Exception):
    """The app's write after its run was cancelled: the client left and nobody rejoined within the grace."""


class Detach:
    """FixedBody's resume methods: `_open` (openStream, with `resume`), `send_opening` after the response's head,
    `settle` when the app raised; `client_left` (from the disconnect, or a write that failed), then, in the
    stream's pump, `_detach`, `_wait_or_poll` while the app is silent, and `_cancel_run`."""

    # FixedBody's, set in its __init__ (see there); so are abandon, raw, _fix, _gone and _close_later.
    run: Any
    id: Any
    client: Any
    closed: bool
    left: bool
    detached: bool
    poll: float
    released: asyncio.Event
    wake: asyncio.Event
    room: asyncio.Event
    error: Any
    cancel_app: Any
    path: str
    send: Any
    opening_block: Any
    idle: asyncio.Event
    pump: "asyncio.Future[None]"
    resume: Any
    state: Any
    framing: str
    policy: Any
    sidecar: Any
    generation: int

    async def _open(self) -> Dict[str, Any]:
        """openStream, with `resume`; one the sidecar refuses (a sidecar older than §16) is left out, with a
        warning, and the stream is repaired without it."""
        try:
            opened: Dict[str, Any] = await self.client.open_stream(state=self.state, framing=self.framing,
                                                                   resume=self.resume, **self.policy)
            return opened
        except InvalidParamsError as e:
            if self.resume is None or not str((e.data or {}).get("field", "")).startswith("/resume"):
                raise
            log.warning("%s: the sidecar cannot file the stream as a resumable run (%s); it is repaired without "
                        "resume", self.path, e)
            self.resume = None
            fallback: Dict[str, Any] = await self.client.open_stream(state=self.state, framing=self.framing,
                                                                     **self.policy)
            return fallback

    async def settle(self) -> None:
        """The app raised mid-response: every whole event it wrote goes out first, into the run log and to the
        client, before the stream is abandoned (broken off). So the client holds what the log holds, and its
        rejoin is refused at once (410: nothing after its id in a broken run) rather than answered with the
        rest and cut again (issue 38 item 5); and it gets what it would have got without the middleware."""
        if self.closed or self.pump.done():
            return
        idle = asyncio.ensure_future(self.idle.wait())
        try:
            await asyncio.wait({self.pump, idle}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
            await asyncio.wait({idle})

    async def send_opening(self) -> None:
        """Writes the opening block right behind the response's head, so the client holds an id before the app's
        first event, however long that takes (the server sends each body message as it comes). A client
        already gone is a client that left: a resumable run goes on."""
        block, self.opening_block = self.opening_block, None
        if not block or self.closed or self.left:
            return
        try:
            await self.send({"type": "http.response.body", "body": block.encode("utf-8"), "more_body": True})
        except Exception:  # noqa: BLE001 - as the pump's own writes
            if not self.client_left():
                raise

    def client_left(self) -> bool:
        """The client is gone (its disconnect, or a write to it failed). A resumable run is detached: the app
        goes on, its output to the run log only, until it ends or the sidecar says cancel; True then. Any
        other stream is abandoned, as before resume (False)."""
        if self.closed:
            return False
        if self.run is None or self.id is None:
            self.abandon()
            return False
        if not self.left:
            self.left = True
            self.wake.set()
        return True

    async def _detach(self) -> None:
        """detachStream: from now on, fixStream's replies say when to cancel. A grace of 0 (or a sidecar that
        cannot be asked) cancels at once, as before resume."""
        self.detached = True
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
            return
        # The sidecar answers a cancel only in a fixStream reply: ask at least twice per grace.
        self.poll = max(grace / 2000, 0.01)

    async def _wait_or_poll(self) -> bool:
        """A detached stream's wait for the app: fixStream "" every `poll` seconds while the app is silent,
        for the cancel. False: the run was cancelled."""
        try:
            await asyncio.wait_for(self.wake.wait(), self.poll)
            return True
        except asyncio.TimeoutError:
            await self._fix("")
        if self.closed or self.raw:
            if not self.closed:
                self._cancel_run("the sidecar could not keep the run")
            return False
        return True

    def _cancel_run(self, why: str) -> None:
        """Nobody rejoined within the grace (or the run cannot go on): the stream is closed as broken off (a
        rejoin breaks off too), the app is cancelled, and its writes fail from now on."""
        if why:
            log.warning("%s: the client left and %s; the app is cancelled", self.path, why)
        if self.id is not None:
            self._close_later(self.id, broken=True)
            self.id = None
        self.closed = True
        if self.error is None:
            self.error = RunCancelled("the client left and nobody rejoined the run within the grace period")
        self.released.set()
        self.room.set()
        if self.cancel_app is not None:
            self.cancel_app()

