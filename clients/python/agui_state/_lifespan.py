"""The ASGI lifespan protocol through agui_state.asgi: the sidecar starts with the app and is closed with it
(ASGI spec, "Lifespan Protocol"), whether the app takes part in the protocol or not."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, MutableMapping, Optional

from ._sidecar import SharedSidecar, log

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Lifespan:
    """One lifespan scope. The sidecar starts when the server's `lifespan.startup` comes, beside the app's
    own startup, and the app's `lifespan.startup.complete` goes on to the server once it has: so the
    server serves its first request with the sidecar up. It is closed before the app's
    `lifespan.shutdown.complete` goes on. An app that does not take part (it raises, or returns without
    answering startup: ASGI says the server then carries on without lifespan events) is answered here."""

    def __init__(self, app: ASGIApp, sidecar: SharedSidecar, receive: Receive, send: Send) -> None:
        self.app, self.sidecar, self.down_receive, self.down_send = app, sidecar, receive, send
        self.starting: Optional["asyncio.Task[None]"] = None
        self.answered = False  # the app sent a lifespan message of its own

    async def run(self, scope: Scope) -> None:
        try:
            await self.app(scope, self.receive, self.send)
        except Exception as e:  # noqa: BLE001 - an app that raises takes no part (ASGI, Lifespan Protocol)
            if self.answered:
                raise
            log.info("the app does not take part in the lifespan protocol (%s: %s); AguiStateMiddleware "
                     "answers it", type(e).__name__, e)
        if not self.answered:
            await self._answer()

    async def receive(self) -> Message:
        message = await self.down_receive()
        if message["type"] == "lifespan.startup" and self.starting is None:
            self.starting = asyncio.get_running_loop().create_task(self.sidecar.start())
        return message

    async def send(self, message: Message) -> None:
        self.answered = True
        kind = message["type"]
        if kind in ("lifespan.startup.complete", "lifespan.startup.failed") and self.starting is not None:
            await asyncio.wait({self.starting})  # start() fails open: it never raises
        if kind in ("lifespan.startup.failed", "lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            await self.sidecar.close()
        await self.down_send(message)

    async def _answer(self) -> None:
        """The lifespan of an app that takes no part in it: the sidecar's alone."""
        while self.starting is None:  # the app did not read the startup message
            await self.receive()
        await asyncio.wait({self.starting})
        await self.down_send({"type": "lifespan.startup.complete"})
        while (await self.down_receive())["type"] != "lifespan.shutdown":
            pass
        await self.sidecar.close()
        await self.down_send({"type": "lifespan.shutdown.complete"})
