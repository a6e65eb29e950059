"""What the synchronous client (_sync.py) reads from and writes to: a spawned sidecar's pipes, or a connection to
the host's shared sidecar (protocol/README.md §2, "One sidecar per host"). The session above is the same for
both; only these differ: where bytes go, whether there is an exit status to wait for, and how it is ended."""
from __future__ import annotations

import os
import socket
import subprocess
from typing import Deque, Mapping, Optional, Sequence

from ._errors import SidecarExitedError
from ._starting import Reach, peer_pid

# A send that never blocks, on a socket whose reads still do (the reader sleeps in recv when it has no
# deadline). Not on Windows: there writes block, as the pipes' do (no poll() to wait in).
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_CONNECT_WAIT = 5.0  # seconds a connect() may take: a listening sidecar accepts at once


class Pipes:
    """A sidecar spawned for this client: its stdin, stdout, stderr and exit status."""

    def __init__(self, argv: Sequence[str], env: Optional[Mapping[str, str]], logs: Optional[Deque[str]],
                 nonblocking: bool) -> None:
        stderr = subprocess.PIPE if logs is not None else None
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd, self.rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        if nonblocking:
            os.set_blocking(self.wfd, False)  # writes wait in poll(): a writer may have to read (_sync.py)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read(self, n: int) -> bytes:
        return os.read(self.rfd, n)

    def write(self, data: memoryview) -> int:
        return os.write(self.wfd, data)

    def status(self) -> Optional[int]:
        return self.proc.poll()

    def wait(self, timeout: Optional[float]) -> Optional[int]:
        """The exit status; raises subprocess.TimeoutExpired after `timeout`."""
        return self.proc.wait(timeout)

    def error(self, returncode: Optional[int], closing: bool) -> SidecarExitedError:
        return SidecarExitedError(returncode, closing)

    def end_input(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def kill(self) -> None:
        self.proc.kill()

    def release(self, exited: bool) -> None:
        """After close(): stdout is closed once the process has exited (else a reader may still hold it)."""
        if exited and self.proc.stdout is not None:
            self.proc.stdout.close()


class Connection:
    """A connection to the shared sidecar: one socket both ways, and no exit status (the sidecar is not ours)."""

    def __init__(self, reach: Reach) -> None:
        self.address = reach.address.text
        self.sock = reach.open(_CONNECT_WAIT)
        self.rfd = self.wfd = self.sock.fileno()
        self._pid = peer_pid(self.sock)

    @property
    def pid(self) -> int:
        if self._pid is None:
            raise RuntimeError(f"the pid of the agui-state sidecar at {self.address} is not known")
        return self._pid

    def read(self, n: int) -> bytes:
        return self.sock.recv(n)

    def write(self, data: memoryview) -> int:
        return self.sock.send(data, _DONTWAIT)

    def status(self) -> Optional[int]:
        return None

    def wait(self, timeout: Optional[float]) -> Optional[int]:
        return None  # no process of ours: the end of the replies is all there is to wait for

    def error(self, returncode: Optional[int], closing: bool) -> SidecarExitedError:
        return SidecarExitedError(None, closing, self.address)

    def end_input(self) -> None:
        # The sidecar answers what it read, then ends the connection (protocol/README.md §2).
        self.sock.shutdown(socket.SHUT_WR)

    def kill(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # a reader blocked in recv() wakes to the end
        except OSError:
            pass

    def release(self, exited: bool) -> None:
        if not exited:
            self.kill()
        self.sock.close()
