"""The asyncio client: the sidecar's stdout is read by one task on the event loop, and each call awaits a
future of its own, so nothing ever blocks the loop and any number of calls can be in flight."""
from __future__ import annotations

import asyncio
from typing import Any, Coroutine, Deque, Dict, Mapping, Optional, Sequence

from ._common import LineSplitter, Methods, Result, StrPath, encode, Spawn, replies
from ._errors import SidecarExitedError, error_from_reply

_CHUNK = 1 << 16


class _Session:
    """One sidecar process: its pipes, its pending calls (id -> Future), its reader task."""

    def __init__(self, proc: "asyncio.subprocess.Process", logs: Optional[Deque[str]]) -> None:
        self.proc = proc
        self.pending: Dict[int, "asyncio.Future[Result]"] = {}
        self.write_lock = asyncio.Lock()  # one message on stdin at a time, and one drain() at a time
        self.exited = self.closing = False
        self.reader = asyncio.ensure_future(self._read())
        self.drainer = asyncio.ensure_future(self._drain(logs)) if logs is not None else None

    @classmethod
    async def start(cls, argv: Sequence[str], env: Optional[Mapping[str, str]],
                    logs: Optional[Deque[str]]) -> "_Session":
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if logs is not None else None, env=env)
        return cls(proc, logs)

    async def _drain(self, logs: Deque[str]) -> None:
        # Read stderr to its end whatever it holds, so the sidecar never blocks on a full pipe.
        assert self.proc.stderr is not None
        lines = LineSplitter()
        while True:
            chunk = await self.proc.stderr.read(_CHUNK)
            if not chunk:
                break
            logs.extend(line.decode("utf-8", "replace") for line in lines.feed(chunk))
        if lines.rest():
            logs.append(lines.rest().decode("utf-8", "replace"))

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        lines = LineSplitter()
        try:
            while True:
                chunk = await self.proc.stdout.read(_CHUNK)
                if not chunk:
                    break
                for line in lines.feed(chunk):
                    self._dispatch(line)
            self._dispatch(lines.rest())
            try:  # stdout is closed: the process is exiting, or has exited
                await asyncio.wait_for(self.proc.wait(), 5)
            except asyncio.TimeoutError:
                pass  # it closed stdout and lives on: the error says so (returncode None)
        finally:
            # Whatever ended the reading (end of stdout, or this task cancelled with the loop), no reply
            # will come any more: every pending call fails now, and every later one at once.
            self.exited = True
            pending, self.pending = self.pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(self.exit_error())

    def _dispatch(self, line: bytes) -> None:
        for reply in replies(line):
            fut = self.pending.pop(reply["id"], None)
            # done: its caller was cancelled, and its finally has not yet run to take it out of pending
            if fut is not None and not fut.done():
                fut.set_result(reply)

    def exit_error(self) -> SidecarExitedError:
        return SidecarExitedError(self.proc.returncode, self.closing)

    async def call(self, msg_id: int, method: str, params: Mapping[str, Any], timeout: Optional[float]) -> Any:
        line = encode(msg_id, method, params)
        if self.exited:
            raise self.exit_error()
        fut: "asyncio.Future[Result]" = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = fut
        try:
            try:
                async with self.write_lock:
                    assert self.proc.stdin is not None
                    # write() queues the whole line at once, so a caller cancelled in drain() below
                    # leaves no half message behind: the request goes, and its late reply is dropped.
                    self.proc.stdin.write(line)
                    await self.proc.stdin.drain()
            except (ConnectionError, OSError):
                # The pipe is gone. The reader is about to see the end of stdout and fail every pending
                # call with the exit status; wait for it (without cancelling it) to report that status.
                await asyncio.wait({self.reader}, timeout=5)
                raise self.exit_error() from None
            reply = await (fut if timeout is None else asyncio.wait_for(fut, timeout))
        finally:
            self.pending.pop(msg_id, None)
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved, so that asyncio does not log it as never retrieved
        if "error" in reply:
            raise error_from_reply(reply["error"])
        return reply.get("result")

    async def close(self, timeout: Optional[float]) -> None:
        self.closing = True
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # what was written still goes: the pipe is closed once it is flushed
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except asyncio.TimeoutError:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass
            await self.proc.wait()
        tasks = {self.reader} if self.drainer is None else {self.reader, self.drainer}
        await asyncio.wait(tasks, timeout=timeout)


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
