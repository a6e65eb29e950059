"""Reaching a shared sidecar (protocol/README.md §2, "One sidecar per host"): a connection to its address, and in
start mode, when nobody answers there, `agui-state serve --listen ADDRESS --exit-idle 60000` started detached,
then connected to once it answers. Of several workers starting at once, one sidecar takes the socket and the
others' starts exit 3 (a sidecar serves there already): every worker then connects to the one that serves. A start
that exits 2 had its command line refused (a bad flag in `args`, a path that is not a socket): starting again cannot
mend that, and the client gives up at once (fails open)."""
from __future__ import annotations

import asyncio
import os
import shlex
import socket
import struct
import subprocess
import threading
import time
from typing import Any, Awaitable, Callable, List, Mapping, Optional, Sequence, Tuple

from ._address import Address, Shared
from ._errors import SidecarUnreachableError

# Seconds a sidecar started here has to answer at its address before the client gives up (fails open). A start
# takes well under a second; the rest is room for a loaded machine.
START_WAIT = 10.0
_RETRY = 0.02  # seconds between two tries to connect to a sidecar being started


class Silent(ConnectionError):
    """A connection that closed before the sidecar answered on it: the sidecar was dying. The kernel accepts on a
    socket until the process's last descriptor is closed, which may come after the connections it served saw
    their end: a worker reconnecting at once may reach the dying sidecar, and so each new connection is asked
    one `stats` before it counts as made."""


# Nobody answers at the address: no socket file, a socket (or port) nobody accepts on (a dead sidecar's), or one
# accepted by a sidecar on its way out (refused, reset, or Silent).
_NOBODY = (ConnectionError, FileNotFoundError)
_PING = b'{"jsonrpc":"2.0","id":0,"method":"stats"}\n'  # id 0: a client's own calls count from 1
# Bytes a socket to the sidecar buffers each way: as the pipes' (_async.py), so that a response of megabytes
# crosses in few writes. The system caps it (net.core.wmem_max); the default serves, slower.
_SOCKET_BYTES = 1 << 20
# `serve --listen`'s exit statuses (src/cli/exit.ts): 3, another sidecar serves the socket (this start lost the race
# to it); 0, it ended on its own (a signal, --exit-idle). Either way, connect to whoever serves. 2 is a refusal: the
# command line (a bad flag, a path that is not a socket) is wrong, and will be on every start.
_SERVED_ALREADY = 3
_ENDED = 0
_REFUSED = 2
_LOST_WAIT = 0.5  # seconds the winner of a race has to answer once the start made here has lost it
_STARTS = 3  # starts per connection at most, each lost to a sidecar that was on its way out


def start_argv(binary: str, address: Address, args: Sequence[str]) -> List[str]:
    """The command line of a shared sidecar a client starts: `args` (the client's) last, so that one given
    there, such as --exit-idle, is the one that holds."""
    return [binary, "serve", "--listen", address.text, "--exit-idle", "60000", *args]


def _spawn_detached(argv: Sequence[str], env: Optional[Mapping[str, str]]) -> "subprocess.Popen[bytes]":
    """The sidecar in a session of its own, with no stdio of ours, so that it outlives the worker that started it
    and no signal to the worker's group reaches it. It is still this process's child until then: a thread waits
    for it, so that its exit (a lost race, exit 3, or --exit-idle) leaves no zombie behind."""
    extra: Any = {"start_new_session": True}
    if os.name == "nt":  # no sessions there: a process of its own group, with no console
        extra = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP | subprocess.DETACHED_PROCESS}  # type: ignore[attr-defined]
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, close_fds=True, **extra)
    threading.Thread(target=proc.wait, name="agui-state-started", daemon=True).start()
    return proc


def _widen(sock: socket.socket) -> None:
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BYTES)
        except OSError:
            pass


def peer_pid(sock: Optional[socket.socket]) -> Optional[int]:
    """The pid of the process at the other end of a Unix socket (Linux's SO_PEERCRED); None elsewhere."""
    cred = getattr(socket, "SO_PEERCRED", None)
    if sock is None or cred is None or sock.family != getattr(socket, "AF_UNIX", None):
        return None
    try:
        pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, cred, struct.calcsize("3i")))
    except OSError:
        return None
    return pid or None


def _probe(sock: socket.socket, timeout: float) -> None:
    """One `stats` on the new connection, its reply read and dropped: Silent if the connection ends first."""
    sock.settimeout(timeout)
    sock.sendall(_PING)
    got = b""
    while not got.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise Silent("the connection closed before the sidecar answered")
        got += chunk


def connect(address: Address, timeout: float) -> socket.socket:
    """A blocking socket connected to `address` (the synchronous client's), once the sidecar answered on it."""
    if address.kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # type: ignore[attr-defined]
        try:
            sock.settimeout(timeout)
            sock.connect(address.path)
        except BaseException:
            sock.close()
            raise
    else:
        sock = socket.create_connection((address.host, address.port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        _probe(sock, timeout)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    _widen(sock)
    return sock


Probe = Callable[[asyncio.Transport, asyncio.Protocol], Awaitable[None]]


async def connect_async(address: Address, factory: Callable[[], asyncio.Protocol], probe: Probe
                        ) -> Tuple[asyncio.Transport, asyncio.Protocol]:
    """The event loop's connection to `address`, read by the protocol `factory` makes, once `probe` (a call
    on it) says the sidecar answers there (else Silent)."""
    loop = asyncio.get_running_loop()
    if address.kind == "unix":
        transport, protocol = await loop.create_unix_connection(factory, address.path)
    else:  # the loop sets TCP_NODELAY
        transport, protocol = await loop.create_connection(factory, address.host, address.port)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        _widen(sock)
    try:
        await probe(transport, protocol)  # type: ignore[arg-type]
    except BaseException:
        transport.abort()
        raise
    return transport, protocol  # type: ignore[return-value]


class Reach:
    """How a client reaches its shared sidecar: connect, and in start mode start it when nobody answers."""

    def __init__(self, shared: Shared, argv: Sequence[str], env: Optional[Mapping[str, str]]) -> None:
        self.address, self.start = shared.address, shared.start
        self.argv, self.env = list(argv), env  # the start's command line (start mode only)

    def _unreachable(self, e: BaseException) -> SidecarUnreachableError:
        return SidecarUnreachableError(self.address.text, f"nobody answers there ({type(e).__name__}: {e})")

    def _hung(self) -> SidecarUnreachableError:
        return SidecarUnreachableError(self.address.text, "it took the connection and did not answer on it")

    def _starting(self) -> "_Start":
        return _Start(self)

    def open(self, timeout: float) -> socket.socket:
        try:
            return self._open(timeout)
        except socket.timeout:
            raise self._hung() from None

    async def open_async(self, factory: Callable[[], asyncio.Protocol], probe: Probe
                         ) -> Tuple[asyncio.Transport, asyncio.Protocol]:
        try:
            return await self._open_async(factory, probe)
        except asyncio.TimeoutError:
            raise self._hung() from None

    def _open(self, timeout: float) -> socket.socket:
        try:
            return connect(self.address, timeout)
        except _NOBODY as e:
            if not self.start:
                raise self._unreachable(e) from e
        start = self._starting()
        while True:
            time.sleep(_RETRY)
            try:
                return connect(self.address, timeout)
            except _NOBODY as e:
                start.check(e)

    async def _open_async(self, factory: Callable[[], asyncio.Protocol], probe: Probe
                          ) -> Tuple[asyncio.Transport, asyncio.Protocol]:
        try:
            return await connect_async(self.address, factory, probe)
        except _NOBODY as e:
            if not self.start:
                raise self._unreachable(e) from e
        start = self._starting()
        while True:
            await asyncio.sleep(_RETRY)
            try:
                return await connect_async(self.address, factory, probe)
            except _NOBODY as e:
                start.check(e)


class _Start:
    """The sidecars one client starts to reach its address, and when it gives up (fails open): at once when a
    start's command line is refused (exit 2) or it fails otherwise, when START_WAIT has passed, or after _STARTS
    starts that each lost. A start that lost (exit 3) found a sidecar serving, or binding, the socket, which then
    answers at once; when none does within _LOST_WAIT, the one it lost to was on its way out (a sidecar killed as
    the client reconnected), and the client starts another. One that ended (exit 0) is taken the same way."""

    def __init__(self, reach: Reach) -> None:
        self.reach, self.starts = reach, 1
        self.proc = _spawn_detached(reach.argv, reach.env)
        self.deadline = time.monotonic() + START_WAIT
        self.lost: Optional[float] = None

    def check(self, e: BaseException) -> None:
        """Nobody answered (`e`): raises SidecarUnreachableError when it is time to give up."""
        code, now = self.proc.returncode, time.monotonic()
        address = self.reach.address.text
        if code == _REFUSED:
            raise SidecarUnreachableError(address, "the sidecar started there refused its command line (exit 2): "
                                          f"{shlex.join(self.reach.argv)}") from e
        if code is not None and code not in (_SERVED_ALREADY, _ENDED):
            raise SidecarUnreachableError(address, f"the sidecar started there exited with status {code}: "
                                          f"{shlex.join(self.reach.argv)}") from e
        if now >= self.deadline:
            raise SidecarUnreachableError(address, f"the sidecar started there did not answer within {START_WAIT:g} s "
                                          f"({type(e).__name__}: {e})") from e
        if code is not None:  # lost the race, or ended: whoever serves answers soon, or starts again
            if self.lost is None:
                self.lost = now
            elif now - self.lost >= _LOST_WAIT:
                if self.starts == _STARTS:
                    raise SidecarUnreachableError(address, f"the {_STARTS} sidecars started there found one serving "
                                                  f"(exit 3) or ended, and nobody answers ({type(e).__name__}: {e})") from e
                self.proc, self.lost = _spawn_detached(self.reach.argv, self.reach.env), None
                self.starts += 1
