"""The tasks agui_state.asgi starts for one request, held so that none outlives it (issue 39 §3)."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Set

from ._sidecar import REPAIR_CALL_LIMIT


class Tasks:
    """Every task one request's handling starts (the app's, the stream's pump, the reads of the server and of
    the sidecar, the closeStream calls): kept here, since asyncio holds a running task only weakly, and on the
    way out cancelled (or, started with `finish`, let finish: a closeStream, bounded by the call limit) and
    awaited. So none is lost mid-way or goes on after its request, and none logs an error nobody read."""

    def __init__(self) -> None:
        self.running: Set["asyncio.Future[Any]"] = set()
        self.finishing: Set["asyncio.Future[Any]"] = set()

    def start(self, work: Awaitable[Any], *, finish: bool = False) -> "asyncio.Future[Any]":
        task = asyncio.ensure_future(work)
        self.running.add(task)
        if finish:
            self.finishing.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: "asyncio.Future[Any]") -> None:
        self.running.discard(task)
        self.finishing.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved here: whoever needs the outcome awaits the task and has it

    async def close(self) -> None:
        """Cancels what is running (but what is to finish, which gets REPAIR_CALL_LIMIT: a sidecar given with
        no timeout may hang) and waits for all of it, and for what those start on their way out."""
        while self.running:
            for task in self.running - self.finishing:
                task.cancel()
            _, late = await asyncio.wait(set(self.running), timeout=REPAIR_CALL_LIMIT)
            self.finishing -= late  # cancelled on the next turn
