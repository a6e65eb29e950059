"""What the shared-sidecar tests share (protocol/README.md §2, "One sidecar per host"): a short socket path of
their own, the real `agui-state serve --listen` started on it, and the processes serving it found in /proc, so
that every sidecar a test starts (itself, or a client in start mode, detached) is killed at its end."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Callable, Iterator, List, Optional

import pytest
from helpers import BIN, child_env

# A hang guard for waits on another process, never what a test asserts.
WAIT = 30.0


def serving(path: str) -> List[int]:
    """The live sidecars whose command line names the socket `path` (the ones started on it, those that lost the
    race to serve it included, until they exit). Zombies have no command line."""
    found = []
    binary = os.path.realpath(BIN)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if f"unix:{path}".encode() in argv and os.readlink(f"/proc/{pid}/exe") == binary:
                found.append(int(pid))
        except OSError:
            continue
    return found


def until(test: Callable[[], bool], what: str) -> None:
    """Waits for `test()` to hold (a hang guard of WAIT seconds, never a figure under test)."""
    deadline = time.monotonic() + WAIT
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


_STARTED: List["Serve"] = []


class Serve:
    """`agui-state serve --listen ADDRESS` started by the test, once it says it listens (`address`, a TCP port 0
    resolved); killed at the end of the test (the `sock` fixture) if the test has not."""

    def __init__(self, address: str, *flags: str) -> None:
        self.proc = subprocess.Popen([BIN, "serve", "--listen", address, *flags], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=child_env())
        _STARTED.append(self)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on "), line
        self.address = line[len("listening on "):].strip()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(WAIT)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def sock() -> Iterator[str]:
    """A socket path of the test's own, short enough for any Unix (103 bytes); every process serving it is
    killed at the end, and the directory removed."""
    where = tempfile.mkdtemp(prefix="agui-", dir="/tmp")
    path = os.path.join(where, "s.sock")
    try:
        yield path
    finally:
        while _STARTED:
            _STARTED.pop().kill()
        for pid in serving(path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        until(lambda: not serving(path), "the test's sidecars to exit")
        shutil.rmtree(where, ignore_errors=True)


def cmdline(pid: int) -> Optional[List[str]]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return None
