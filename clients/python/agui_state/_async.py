"""The asyncio client: the sidecar's pipes are read by the event loop itself, through a SubprocessProtocol,
and each call awaits a future of its own, so nothing ever blocks the loop and any number of calls can be
in flight. With `sidecar` (or AGUI_STATE_SIDECAR) the same calls go over a connection to the host's shared
sidecar instead (_link.py, protocol/README.md §2, "One sidecar per host").

Nothing runs per call that the loop does not need: the protocol's data callback splits stdout into frames
(LSP framing, _framing.py: a long text goes as raw UTF-8, not in a JSON string) and sets each reply on its
caller's future directly (no reader task between them, so a reply costs one
wake-up, the caller's), a request is one transport.write (the loop writes it at once when the pipe has
room, and queues it whole when not), and a timeout is a timer handle on the future, not a wrapping task
(_calls.py).
"""
from __future__ import annotations

import asyncio
import subprocess
from typing import Any, Coroutine, Deque, Mapping, Optional, Sequence, Union

from ._calls import Calls
from ._common import Methods, Result, StrPath, Spawn
from ._errors import SidecarExitedError
from ._link import Link
from ._wire import LineSplitter

_EXIT_WAIT = 5.0  # seconds to wait for the exit status once stdout has ended


class _Proc:
    """The process as the session sees it: its pid and exit status, and a wait for its exit."""

    def __init__(self, transport: asyncio.SubprocessTransport, exit: "asyncio.Future[None]") -> None:
        self._transport, self._exit = transport, exit

    @property
    def pid(self) -> int:
        return self._transport.get_pid()

    @property
    def returncode(self) -> Optional[int]:
        return self._transport.get_returncode()

    async def wait(self) -> Optional[int]:
        await asyncio.shield(self._exit)
        return self.returncode

    def kill(self) -> None:
        self._transport.kill()


class _Session(Calls, asyncio.SubprocessProtocol):
    """One sidecar process: its pipes, and the protocol callbacks through which the loop hands it stdout,
    stderr and the exit."""

    def __init__(self, logs: Optional[Deque[str]]) -> None:
        super().__init__(logs)
        self.err_lines = LineSplitter()
        self.eof = False
        self.exit_seen: "asyncio.Future[None]" = self.loop.create_future()  # the process has exited
        self.stderr_done: "asyncio.Future[None]" = self.loop.create_future()
        self.exit_timer: Optional[asyncio.TimerHandle] = None
        if logs is None:
            self.stderr_done.set_result(None)

    @classmethod
    async def start(cls, argv: Sequence[str], env: Optional[Mapping[str, str]],
                    logs: Optional[Deque[str]]) -> "_Session":
        loop = asyncio.get_running_loop()
        transport, session = await loop.subprocess_exec(
            lambda: cls(logs), *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if logs is not None else None, env=env)
        # Set here, not in connection_made: the loop calls that soon after this returns, not before.
        session.transport = transport
        stdin = transport.get_pipe_transport(0)
        assert isinstance(stdin, asyncio.WriteTransport)
        session.writer = stdin
        session.proc = _Proc(transport, session.exit_seen)
        for fd in (0, 1):
            _widen(transport.get_pipe_transport(fd))
        return session

    transport: asyncio.SubprocessTransport
    proc: _Proc

    # The protocol: the loop calls these as data, ends and the exit arrive, in that order per pipe.

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            self._replies(data)
        elif self.logs is not None:  # stderr, read to its end whatever it holds: the sidecar never blocks on it
            self.logs.extend(line.decode("utf-8", "replace") for line in self.err_lines.feed(data))

    def pipe_connection_lost(self, fd: int, exc: Optional[Exception]) -> None:
        if fd == 0:  # stdin is gone (closed, or a broken pipe): stdout's end will say how the process ended
            self._wake_drains()
        elif fd == 1:
            self.eof = True  # a frame cut off by the end is no reply: its call fails with the exit
            if self.exit_seen.done():
                self._finish()
            else:  # it closed stdout and may live on: the error says so (returncode None) after a while
                self.exit_timer = self.loop.call_later(_EXIT_WAIT, self._finish)
        elif fd == 2:
            if self.logs is not None and self.err_lines.rest():
                self.logs.append(self.err_lines.rest().decode("utf-8", "replace"))
            if not self.stderr_done.done():
                self.stderr_done.set_result(None)

    def process_exited(self) -> None:
        if not self.exit_seen.done():
            self.exit_seen.set_result(None)
        if self.eof:
            self._finish()

    def _finish(self) -> None:
        if self.exit_timer is not None:
            self.exit_timer.cancel()
        super()._finish()

    def exit_error(self) -> SidecarExitedError:
        return SidecarExitedError(self.proc.returncode, self.closing)

    def abort(self) -> None:
        try:
            self.transport.kill()
        except ProcessLookupError:
            pass  # it has exited already

    async def close(self, timeout: Optional[float]) -> None:
        self.closing = True
        self.writer.close()  # what was written still goes: the pipe is closed once it is flushed
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            await self.proc.wait()
        await asyncio.wait({self.done, self.stderr_done}, timeout=timeout)
        if self.exited:
            self.transport.close()  # the process has exited: this only releases the pipes


class AsyncAguiState(Spawn, Methods[Coroutine[Any, Any, Result]]):
    """A running agui-state sidecar for asyncio code; every method is awaited.

    Start it with `async with AsyncAguiState() as s:` or `s = await AsyncAguiState().start()`.
    The arguments are AguiState's: path (else $AGUI_STATE_BIN, else the bundled binary, else `agui-state`
    on PATH), args, env, capture_logs, log_lines and timeout (seconds per reply; None: no limit), and
    sidecar and sidecar_start, to connect to the host's shared sidecar instead of spawning one.
    One instance serves every task on its event loop; it must not be used from another loop.
    """

    def __init__(self, path: Optional[StrPath] = None, args: Sequence[str] = (),
                 env: Optional[Mapping[str, str]] = None, *, capture_logs: bool = False, log_lines: int = 1000,
                 timeout: Optional[float] = None, sidecar: Optional[str] = None,
                 sidecar_start: Optional[bool] = None) -> None:
        super().__init__(path, args, env, capture_logs=capture_logs, log_lines=log_lines, timeout=timeout,
                         sidecar=sidecar, sidecar_start=sidecar_start)
        self._session: Optional[Union[_Session, Link]] = None

    async def _open(self) -> Union[_Session, Link]:
        if self.reach is not None:
            return await Link.open(self.reach, self.timeout)
        return await _Session.start(self.argv, self.env, self._logs)

    async def start(self) -> "AsyncAguiState":
        """Spawn the sidecar (with the loop's subprocess_exec), or connect to the shared one. Returns self."""
        if self._session is not None:
            raise RuntimeError("AsyncAguiState is already started; restart() replaces the process")
        self._session = await self._open()
        return self

    async def __aenter__(self) -> "AsyncAguiState":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _live(self) -> Union[_Session, Link]:
        if self._session is None:
            raise RuntimeError("AsyncAguiState is not started: use `async with AsyncAguiState() as s:` "
                               "or `s = await AsyncAguiState().start()`")
        return self._session

    @property
    def started(self) -> bool:
        """Whether start() has run (a later exit of the sidecar does not change it)."""
        return self._session is not None

    @property
    def pid(self) -> int:
        """The sidecar's process id. For a shared sidecar, as its Unix socket says (Linux); RuntimeError where
        nothing says it (loopback TCP)."""
        session = self._live()
        if isinstance(session, Link):
            if session.pid is None:
                raise RuntimeError(f"the pid of the agui-state sidecar at {session.address} is not known")
            return session.pid
        return session.proc.pid

    async def close(self, timeout: Optional[float] = 5.0) -> None:
        """Close stdin, wait for the sidecar to answer what it has read and exit; kill it after `timeout`.
        A shared sidecar is left serving: only this connection ends, once what it sent is answered."""
        if self._session is not None:
            await self._session.close(timeout)

    def kill(self) -> None:
        """End the process at once (SIGKILL, which a stopped process gets too): every call waiting fails with
        SidecarExitedError. For a sidecar that no longer answers; close() is the orderly end. For a shared
        sidecar, the connection is dropped; the sidecar is not this client's to end."""
        self._live().abort()

    async def restart(self, timeout: Optional[float] = 5.0) -> None:
        """Start a fresh sidecar (it knows no threads: call open_run with each thread's state). For a shared
        sidecar: connect again (in start mode, starting it when nobody answers); what it holds, it still holds."""
        old, self._session = self._session, None
        if old is not None:
            await old.close(timeout)
        self._session = await self._open()

    async def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
                   timeout: Optional[float] = None) -> Result:
        """Send one request and await its result, or raise AguiStateError (a subclass chosen by code)."""
        session = self._live()
        result: Result = await session.call(next(self._ids), method, {} if params is None else params,
                                            self.timeout if timeout is None else timeout)
        return result


# Bytes a pipe to or from the sidecar holds. Linux's default is 64 KiB: a response of megabytes (a LangGraph
# answer's RAW events carry the state again, about 11 MB) then crosses in hundreds of writes and reads each
# way, each one waking the other process. 1 MiB, the usual /proc/sys/fs/pipe-max-size, cuts that sixteenfold.
_PIPE_BYTES = 1 << 20


def _widen(pipe: Optional[asyncio.BaseTransport]) -> None:
    """Asks for a pipe of _PIPE_BYTES (Linux's F_SETPIPE_SZ); elsewhere, or refused, it stays as it is."""
    try:
        import fcntl  # Unix only: on Windows the pipes stay as they are
    except ImportError:
        return
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)
    file = pipe.get_extra_info("pipe") if pipe is not None else None
    if setpipe is None or file is None:
        return
    try:
        fcntl.fcntl(file.fileno(), setpipe, _PIPE_BYTES)
    except OSError:
        pass  # over the system's limit for an unprivileged process: the default serves, slower
