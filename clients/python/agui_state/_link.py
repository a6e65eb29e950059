"""The asyncio client's connection to a shared sidecar (protocol/README.md §2, "One sidecar per host"): the same
calls as over a spawned sidecar's pipes (_calls.py), on a Unix socket or a loopback TCP port. The sidecar is not
this client's: closing the connection leaves it serving the others, and a connection that breaks is, to the
caller, a sidecar that died (SidecarExitedError), so that the middleware's restart path reconnects."""
from __future__ import annotations

import asyncio
from typing import Optional

from ._calls import Calls
from ._errors import SidecarExitedError
from ._starting import Reach, Silent, peer_pid

_PROBE_WAIT = 5.0  # seconds the first call on a new connection may take: a live sidecar answers `stats` at once


class Link(Calls, asyncio.Protocol):
    """One connection: the loop hands it what the sidecar writes, and its end."""

    def __init__(self, address: str) -> None:
        super().__init__(None)
        self.address = address
        self.pid: Optional[int] = None  # the sidecar's, where the socket says (a Unix socket on Linux)

    @classmethod
    async def open(cls, reach: Reach, timeout: Optional[float]) -> "Link":
        async def probe(transport: asyncio.Transport, link: asyncio.Protocol) -> None:
            assert isinstance(link, Link)
            link.writer = transport
            try:  # id 0: the client's own calls count from 1
                await link.call(0, "stats", {}, _PROBE_WAIT if timeout is None else min(timeout, _PROBE_WAIT))
            except SidecarExitedError:
                raise Silent("the connection closed before the sidecar answered") from None

        transport, link = await reach.open_async(lambda: cls(reach.address.text), probe)
        assert isinstance(link, Link)
        link.pid = peer_pid(transport.get_extra_info("socket"))
        return link

    writer: asyncio.Transport

    def data_received(self, data: bytes) -> None:
        self._replies(data)

    def eof_received(self) -> bool:
        return False  # the sidecar ended the connection: close our side too (connection_lost follows)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self._wake_drains()
        self._finish()

    def exit_error(self) -> SidecarExitedError:
        return SidecarExitedError(None, self.closing, self.address)

    def abort(self) -> None:
        self.writer.abort()

    async def close(self, timeout: Optional[float]) -> None:
        """Our end of the input: the sidecar answers what it read, then ends the connection; dropped after
        `timeout`. The sidecar goes on serving its other connections."""
        self.closing = True
        if not self.exited:
            try:
                self.writer.write_eof()
            except (OSError, RuntimeError):
                self.writer.abort()
        await asyncio.wait({self.done}, timeout=timeout)
        if not self.exited:
            self.writer.abort()
            await asyncio.wait({self.done})
        self.writer.close()
