"""The asyncio client: the sidecar's pipes are read by the event loop itself, through a SubprocessProtocol,
and each call awaits a future of its own, so nothing ever blocks the loop and any number of calls can be
in flight.

Nothing runs per call that the loop does not need: the protocol's data callback splits stdout into frames
(LSP framing, _framing.py: a long text goes as raw UTF-8, not in a JSON string) and sets each reply on its
caller's future directly (no reader task between them, so a reply costs one
wake-up, the caller's), a request is one transport.write (the loop writes it at once when the pipe has
room, and queues it whole when not), and a timeout is a timer handle on the future, not a wrapping task.
"""
from __future__ import annotations

import asyncio
import collections
import subprocess
from typing import Any, Coroutine, Deque, Dict, List, Mapping, Optional, Sequence, Set

from ._common import Methods, Result, StrPath, Spawn
from ._framing import FrameReader, FramingError, frame
from ._wire import LineSplitter, replies
from ._errors import SidecarExitedError, error_from_reply

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


class _Session(asyncio.SubprocessProtocol):
    """One sidecar process: its pipes, its pending calls (id -> Future), and the protocol callbacks
    through which the loop hands it stdout, stderr and the exit."""

    def __init__(self, logs: Optional[Deque[str]]) -> None:
        loop = asyncio.get_running_loop()
        self.loop, self.logs = loop, logs
        self.pending: Dict[int, "asyncio.Future[Result]"] = {}
        self.raw_text: Set[int] = set()  # fixStream calls whose text was bytes: their reply's attachment stays so
        self.frames = FrameReader()  # stdout, read as LSP frames
        self.err_lines = LineSplitter()
        self.exited = self.closing = self.eof = self.broken = False
        self.paused = False  # the stdin pipe is full: callers wait in _drain until the loop resumes it
        self.drain_waiters: Deque["asyncio.Future[None]"] = collections.deque()
        self.exit_seen: "asyncio.Future[None]" = loop.create_future()  # the process has exited
        self.done: "asyncio.Future[None]" = loop.create_future()        # no reply will come any more
        self.stderr_done: "asyncio.Future[None]" = loop.create_future()
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
        session.stdin = stdin
        session.proc = _Proc(transport, session.exit_seen)
        for fd in (0, 1):
            _widen(transport.get_pipe_transport(fd))
        return session

    transport: asyncio.SubprocessTransport
    stdin: asyncio.WriteTransport
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

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_drains()

    def _wake_drains(self) -> None:
        while self.drain_waiters:
            w = self.drain_waiters.popleft()
            if not w.done():
                w.set_result(None)

    def _replies(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            bodies = self.frames.feed(data)
        except FramingError as e:
            # Nothing after it can be read: the process is ended, and every call fails with its exit.
            self.broken = True
            if self.logs is not None:
                self.logs.append(f"agui-state client: {e}; the sidecar is killed")
            try:
                self.transport.kill()
            except ProcessLookupError:
                pass  # it has exited already
            return
        for body, text in bodies:
            got = replies(body)
            if text is not None:  # the result's text came as the frame's attachment (protocol/README.md §2)
                for reply in got:
                    if isinstance(reply.get("result"), dict):
                        # As bytes to a call that gave its text as bytes (the middleware writes them on as they
                        # are); else as str. The sidecar writes UTF-8: a bad byte would be its bug, and is
                        # replaced rather than lose the reply.
                        reply["result"]["text"] = text if reply.get("id") in self.raw_text else \
                            text.decode("utf-8", "replace")
            self._dispatch(got)

    def _dispatch(self, got: List[Result]) -> None:
        for reply in got:
            fut = self.pending.pop(reply["id"], None)
            # done: its caller was cancelled or timed out, and its finally has not yet run to take it out
            if fut is not None and not fut.done():
                fut.set_result(reply)

    def _finish(self) -> None:
        """No reply will come any more: every pending call fails now, and every later one at once."""
        if self.exited:
            return
        self.exited = True
        if self.exit_timer is not None:
            self.exit_timer.cancel()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(self.exit_error())
        self._wake_drains()
        self.done.set_result(None)

    def exit_error(self) -> SidecarExitedError:
        return SidecarExitedError(self.proc.returncode, self.closing)

    @staticmethod
    def _expire(fut: "asyncio.Future[Result]") -> None:
        if not fut.done():
            fut.set_exception(asyncio.TimeoutError())

    async def call(self, msg_id: int, method: str, params: Mapping[str, Any], timeout: Optional[float]) -> Any:
        # A request body handed over whole (openStream's and rejoinStream's `request`) may be tens of MiB: its
        # frame is encoded in a worker thread, so that the event loop is not held meanwhile (issue 39).
        line = await asyncio.to_thread(frame, msg_id, method, params) if _large(params) else \
            frame(msg_id, method, params)
        if self.exited:
            raise self.exit_error()
        fut: "asyncio.Future[Result]" = self.loop.create_future()
        self.pending[msg_id] = fut
        if method == "fixStream" and isinstance(params.get("text"), bytes):
            self.raw_text.add(msg_id)
        timer = None if timeout is None else self.loop.call_later(timeout, self._expire, fut)
        try:
            # write() queues the whole line at once, so a caller cancelled while it waits for room leaves no
            # half message behind: the request goes, and its late reply is dropped. A pipe that is gone
            # drops the line: the end of stdout then fails this call with the exit status.
            self.stdin.write(line)
            if self.paused and not self.exited:
                waiter: "asyncio.Future[None]" = self.loop.create_future()
                self.drain_waiters.append(waiter)
                await waiter
            reply = await fut
        finally:
            if timer is not None:
                timer.cancel()
            self.pending.pop(msg_id, None)
            self.raw_text.discard(msg_id)
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved, so that asyncio does not log it as never retrieved
        if "error" in reply:
            raise error_from_reply(reply["error"])
        return reply.get("result")

    async def close(self, timeout: Optional[float]) -> None:
        self.closing = True
        self.stdin.close()  # what was written still goes: the pipe is closed once it is flushed
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
    on PATH), args, env, capture_logs, log_lines and timeout (seconds per reply; None: no limit).
    One instance serves every task on its event loop; it must not be used from another loop.
    """

    def __init__(self, path: Optional[StrPath] = None, args: Sequence[str] = (),
                 env: Optional[Mapping[str, str]] = None, *, capture_logs: bool = False, log_lines: int = 1000,
                 timeout: Optional[float] = None) -> None:
        super().__init__(path, args, env, capture_logs=capture_logs, log_lines=log_lines, timeout=timeout)
        self._session: Optional[_Session] = None

    async def start(self) -> "AsyncAguiState":
        """Spawn the sidecar (with asyncio.create_subprocess_exec). Returns self."""
        if self._session is not None:
            raise RuntimeError("AsyncAguiState is already started; restart() replaces the process")
        self._session = await _Session.start(self.argv, self.env, self._logs)
        return self

    async def __aenter__(self) -> "AsyncAguiState":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _live(self) -> _Session:
        if self._session is None:
            raise RuntimeError("AsyncAguiState is not started: use `async with AsyncAguiState() as s:` "
                               "or `s = await AsyncAguiState().start()`")
        return self._session

    @property
    def pid(self) -> int:
        return self._live().proc.pid

    async def close(self, timeout: Optional[float] = 5.0) -> None:
        """Close stdin, wait for the sidecar to answer what it has read and exit; kill it after `timeout`."""
        if self._session is not None:
            await self._session.close(timeout)

    def kill(self) -> None:
        """End the process at once (SIGKILL, which a stopped process gets too): every call waiting fails with
        SidecarExitedError. For a sidecar that no longer answers; close() is the orderly end."""
        try:
            self._live().proc.kill()
        except ProcessLookupError:
            pass  # it has exited already

    async def restart(self, timeout: Optional[float] = 5.0) -> None:
        """Start a fresh sidecar (it knows no threads: call open_run with each thread's state)."""
        old, self._session = self._session, None
        if old is not None:
            await old.close(timeout)
        self._session = await _Session.start(self.argv, self.env, self._logs)

    async def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
                   timeout: Optional[float] = None) -> Result:
        """Send one request and await its result, or raise AguiStateError (a subclass chosen by code)."""
        session = self._live()
        result: Result = await session.call(next(self._ids), method, {} if params is None else params,
                                            self.timeout if timeout is None else timeout)
        return result


# Characters of a request body past which its call's line is encoded off the event loop.
_ENCODE_OFF_LOOP = 1 << 20


def _large(params: Mapping[str, Any]) -> bool:
    """Whether params carry a request body (protocol/README.md §14, §16) long enough to encode off the loop."""
    request = params.get("request")
    body = request.get("body") if isinstance(request, Mapping) else None
    return isinstance(body, str) and len(body) > _ENCODE_OFF_LOOP


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
