"""The sidecar agui_state.asgi shares: one process for every middleware of the Python process (or the one
the caller gives), started at the app's startup (lifespan) or on the first stream, and started again when
it dies. With an address (the middleware's `sidecar`, or AGUI_STATE_SIDECAR), one connection of the Python
process to the host's shared sidecar instead, made at the same moments, and made again when it breaks
(protocol/README.md §2, "One sidecar per host"): the same path, only the transport differs."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple

from ._address import Shared
from ._async import AsyncAguiState

if TYPE_CHECKING:  # _tasks takes REPAIR_CALL_LIMIT from here
    from ._tasks import Tasks

log = logging.getLogger("agui_state.asgi")

# Seconds a call to the sidecar this module starts may take (readRejoin: this past its wait). A repair call
# (openStream, fixStream, closeStream, detachStream) answers in well under a millisecond; one unanswered
# this long means the sidecar is hung (stopped, or stuck), and hung() ends it. 5 s leaves a loaded machine
# room and keeps the client's wait under 10 s (protocol/README.md §14, fail open).
REPAIR_CALL_LIMIT = 5.0
# A stream of one event, fed once at startup: the sidecar loads its stream pipeline on the first openStream
# (protocol/README.md §14), which the first response would otherwise wait for (docs/benchmarks.md, B22py).
_WARM_UP = 'data: {"type":"RUN_STARTED","threadId":"agui-state","runId":"warm-up"}\n\n'


class SharedSidecar:
    """The sidecar a middleware uses: the caller's, or the one of the whole process. Started by start() at
    the app's startup, else on the first stream; started again by the first caller that finds it dead
    (died()), once for every stream that waits for it."""

    def __init__(self, given: Optional[AsyncAguiState], args: Sequence[str] = (), host: Optional[Shared] = None) -> None:
        self.client, self.given = given, given is not None
        self.args = tuple(args)  # the command line of the process started here (--store, --detach-grace)
        self.host = host  # the host's shared sidecar, connected to (and in start mode started) rather than spawned
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.ready = self.dead = False
        self.starting: Optional["asyncio.Task[None]"] = None
        # Which process this is, counted from 1: an AsyncAguiState stays the same object across restart(),
        # so a stream that finds the process gone names the one it was using, not the client.
        self.generation = 0

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
            self.client = AsyncAguiState(args=self.args, timeout=REPAIR_CALL_LIMIT) if self.host is None else \
                AsyncAguiState(args=self.args, timeout=REPAIR_CALL_LIMIT, sidecar=self.host.address.text,
                               sidecar_start=self.host.start)
        restarting = self.dead
        if self.dead or not self.client.started:
            await self.client.restart()  # on an instance never started, restart() starts it
        self.dead, self.ready = False, True
        self.generation += 1
        if restarting and self.client.address is not None:
            log.warning("agui-state sidecar at %s: connected again%s", self.client.address, _pid(self.client))
        elif restarting:
            log.warning("agui-state sidecar restarted (pid %d)", self.client.pid)

    async def start(self) -> None:
        """At the app's startup: the process started, and its stream pipeline loaded, so that the first
        response waits for neither. Fails open: the first stream tries again."""
        try:
            client = await self.get()
            opened = await client.open_stream(framing="sse")
            await client.fix_stream(opened["streamId"], _WARM_UP)
            await client.close_stream(opened["streamId"])
        except Exception as e:  # noqa: BLE001 - the app starts whatever happens to the sidecar
            log.warning("agui-state sidecar did not start with the app (%s: %s); the first response starts it",
                        type(e).__name__, e)

    def died(self, generation: int, why: BaseException) -> None:
        """The process of that `generation` is gone (`why`): the next get() starts a new one. Said once per
        process lost, however many streams find it gone."""
        if generation == self.generation and self.ready:
            self.ready, self.dead = False, True
            address = self.client.address if self.client is not None else None
            if address is None:
                log.warning("agui-state sidecar died (%s); starting a new one", why)
            else:  # the connection broke: to this process, the shared sidecar died
                log.warning("agui-state sidecar at %s is gone (%s); connecting again", address, why)

    def hung(self, generation: int, path: str, method: str, then: str) -> None:
        """A `method` call to the process of `generation` went unanswered for the client's timeout: that
        process is ended (a stopped one too: SIGKILL), so its other calls fail and their streams move to a
        new one; the caller goes on without it (`then`), and the next get() starts a new one. One line."""
        client = self.client
        if generation != self.generation or not self.ready or client is None:
            return  # another call found it hung first, or it is gone already
        self.ready, self.dead = False, True
        limit = int((client.timeout or 0) * 1000)
        if client.address is not None:  # not this process's to end: its other workers may be served yet
            log.warning("%s: the agui-state sidecar at %s did not answer %s within %d ms; this process's connection "
                        "to it is closed, %s, and the next stream connects again", path, client.address, method,
                        limit, then)
        else:
            log.warning("%s: the agui-state sidecar did not answer %s within %d ms; it is ended (pid %d), %s, and "
                        "the next stream starts a new one", path, method, limit, client.pid, then)
        client.kill()

    def close_later(self, tasks: Tasks, generation: int, path: str, stream_id: str, broken: bool = False) -> None:
        """closeStream of a stream let go, in a task of `tasks` that is let finish, on the process of
        `generation` only: on another, the id may name another stream. The sidecar forgets it either way
        (a dead one did; an idle limit holds on a live one that cannot be asked)."""
        client = self.client

        async def close() -> None:
            if client is None or not self.ready or self.generation != generation:
                return
            try:
                await client.close_stream(stream_id, broken=broken)
            except asyncio.TimeoutError:
                self.hung(generation, path, "closeStream", "the response had ended")
            except Exception as e:  # noqa: BLE001 - see above
                log.debug("closeStream %s after the response broke off: %s", stream_id, e)

        tasks.start(close(), finish=True)

    async def close(self) -> None:
        """At the server's shutdown: close the process this module started (never the caller's); a shared
        sidecar's connection, leaving the sidecar to the host's other workers."""
        if self.loop is not asyncio.get_running_loop():
            return  # nothing was started on this loop (get() starts anew on a new one)
        if self.starting is not None:
            await asyncio.wait({self.starting})  # a start under way (at startup) ends before the close
        if not self.given and self.client is not None and self.ready:
            client, self.client, self.ready = self.client, None, False
            await client.close()


def _pid(client: AsyncAguiState) -> str:
    try:
        return f" (pid {client.pid})"
    except RuntimeError:
        return ""  # loopback TCP: nothing says it


PROCESS = SharedSidecar(None)
_Key = Tuple[Tuple[str, ...], Optional[Shared]]
_BY_ARGS: Dict[_Key, SharedSidecar] = {((), None): PROCESS}


def shared(args: Sequence[str], host: Optional[Shared] = None) -> SharedSidecar:
    """The process of the whole Python process started with `args`: middleware that ask for the same
    store and grace share one, as those that ask for nothing share PROCESS. With `host`, the Python process's
    one connection to the host's shared sidecar there (in start mode, started with `args`)."""
    key = (tuple(args), host)
    if key not in _BY_ARGS:
        _BY_ARGS[key] = SharedSidecar(None, key[0], host)
    return _BY_ARGS[key]
