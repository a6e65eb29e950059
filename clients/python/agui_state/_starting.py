"""Reaching a shared sidecar (protocol/README.md §2, "One sidecar per host"): a connection to its address, and in
start mode, when nobody answers there, `agui-state serve --listen ADDRESS --exit-idle 60000` started detached,
then connected to once it answers. Of several workers starting at once, one sidecar takes the socket and the
others' starts exit 2 (a sidecar serves there already): every worker then connects to the one that serves."""
from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import threading
import time
from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

from ._address import Address, Shared
from ._errors import SidecarUnreachableError

# Seconds a sidecar started here has to answer at its address before the client gives up (fails open). A start
# takes well under a second; the rest is room for a loaded machine.
START_WAIT = 10.0
_RETRY = 0.02  # seconds between two tries to connect to a sidecar being started
# Nobody answers at the address: no socket file, or a socket (or port) nobody accepts on (a dead sidecar's).
_NOBODY = (ConnectionRefusedError, FileNotFoundError)
# Bytes a socket to the sidecar buffers each way: as the pipes' (_async.py), so that a response of megabytes
# crosses in few writes. The system caps it (net.core.wmem_max); the default serves, slower.
_SOCKET_BYTES = 1 << 20
# A sidecar that exits with this status lost the race to another that serves the socket (`serve --listen`).
_SERVED_ALREADY = 2


def start_argv(binary: str, address: Address, args: Sequence[str]) -> List[str]:
    """The command line of a shared sidecar a client starts: `args` (the client's) last, so that one given
    there, such as --exit-idle, is the one that holds."""
    return [binary, "serve", "--listen", address.text, "--exit-idle", "60000", *args]


def _spawn_detached(argv: Sequence[str], env: Optional[Mapping[str, str]]) -> "subprocess.Popen[bytes]":
    """The sidecar in a session of its own, with no stdio of ours, so that it outlives the worker that started it
    and no signal to the worker's group reaches it. It is still this process's child until then: a thread waits
    for it, so that its exit (a lost race, exit 2, or --exit-idle) leaves no zombie behind."""
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


def connect(address: Address, timeout: float) -> socket.socket:
    """A blocking socket connected to `address` (the synchronous client's)."""
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
    sock.settimeout(None)
    _widen(sock)
    return sock


async def connect_async(address: Address, factory: Callable[[], asyncio.Protocol]
                        ) -> Tuple[asyncio.Transport, asyncio.Protocol]:
    """The event loop's connection to `address`, read by the protocol `factory` makes."""
    loop = asyncio.get_running_loop()
    if address.kind == "unix":
        transport, protocol = await loop.create_unix_connection(factory, address.path)
    else:  # the loop sets TCP_NODELAY
        transport, protocol = await loop.create_connection(factory, address.host, address.port)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        _widen(sock)
    return transport, protocol  # type: ignore[return-value]


class Reach:
    """How a client reaches its shared sidecar: connect, and in start mode start it when nobody answers."""

    def __init__(self, shared: Shared, argv: Sequence[str], env: Optional[Mapping[str, str]]) -> None:
        self.address, self.start = shared.address, shared.start
        self.argv, self.env = list(argv), env  # the start's command line (start mode only)

    def _unreachable(self, e: BaseException) -> SidecarUnreachableError:
        return SidecarUnreachableError(self.address.text, f"nobody answers there ({type(e).__name__}: {e})")

    def _starting(self) -> Tuple["subprocess.Popen[bytes]", float]:
        return _spawn_detached(self.argv, self.env), time.monotonic() + START_WAIT

    def _gave_up(self, proc: "subprocess.Popen[bytes]", deadline: float, e: BaseException) -> Optional[SidecarUnreachableError]:
        """Why waiting for the started sidecar is over, or None to try again: it exited other than having lost the
        race to another (a bad flag, a binary that cannot run), or START_WAIT passed."""
        code = proc.returncode
        if code is not None and code != _SERVED_ALREADY:
            return SidecarUnreachableError(self.address.text, f"the sidecar started there exited with status {code}")
        if time.monotonic() >= deadline:
            return SidecarUnreachableError(self.address.text, f"the sidecar started there did not answer within "
                                           f"{START_WAIT:g} s ({type(e).__name__}: {e})")
        return None

    def open(self, timeout: float) -> socket.socket:
        try:
            return connect(self.address, timeout)
        except _NOBODY as e:
            if not self.start:
                raise self._unreachable(e) from e
        proc, deadline = self._starting()
        while True:
            time.sleep(_RETRY)
            try:
                return connect(self.address, timeout)
            except _NOBODY as e:
                why = self._gave_up(proc, deadline, e)
                if why is not None:
                    raise why from e

    async def open_async(self, factory: Callable[[], asyncio.Protocol]) -> Tuple[asyncio.Transport, asyncio.Protocol]:
        try:
            return await connect_async(self.address, factory)
        except _NOBODY as e:
            if not self.start:
                raise self._unreachable(e) from e
        proc, deadline = self._starting()
        while True:
            await asyncio.sleep(_RETRY)
            try:
                return await connect_async(self.address, factory)
            except _NOBODY as e:
                why = self._gave_up(proc, deadline, e)
                if why is not None:
                    raise why from e
