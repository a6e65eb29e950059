"""The synchronous client: each calling thread writes its request and reads its own reply from the pipe.

There is no reader thread on the reply path. A thread switch under the GIL costs more than the sidecar's
whole answer, and a reply handed from a reader thread to its caller pays two of them; so the caller reads.
When several threads call at once, one of them at a time reads stdout (the reader) for everyone: a reply
for another caller is kept for it by id, and that caller, waiting on a condition, takes it. When the
reader's own reply comes it stops reading and another waiting caller becomes the reader. A caller that
finds nobody reading becomes the reader as it writes, so a lone caller never waits on the condition: its
call is one write and one read. Timeouts are a deadline on poll() (the reader) or on the condition (the
others). The end of stdout is seen by whoever reads it, at once: every waiting call fails with
SidecarExitedError, not after its timeout.

Requests and replies are NDJSON lines (protocol/README.md §2). The asyncio client frames them instead, so
that a long text goes as raw UTF-8 (_framing.py): that is for the middleware, which feeds whole response
bodies through fixStream; a synchronous caller's texts are its own, and a line costs it no more than before.

With `sidecar` (or AGUI_STATE_SIDECAR) the same session runs over a connection to the host's shared sidecar
(_ends.py, protocol/README.md §2, "One sidecar per host"): the socket is both stdin and stdout.
"""
from __future__ import annotations

import select
import subprocess
import threading
import time
from concurrent import futures
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Set, Union

from ._common import Methods, Result, StrPath, Spawn
from ._ends import Connection, Pipes
from ._wire import encode, replies
from ._errors import SidecarExitedError, error_from_reply

_CHUNK = 1 << 16
_READ = select.POLLIN | select.POLLHUP | select.POLLERR
_EXIT_WAIT = 5.0  # seconds to wait for the exit status once stdout has ended
_POLL = hasattr(select, "poll")  # not on Windows


class _Session:
    """One sidecar: its pipes (or its connection, _ends.py), the replies read for callers that have not taken
    them yet, and who is reading stdout now."""

    def __init__(self, ends: Union[Pipes, Connection], logs: Optional[Deque[str]]) -> None:
        self.ends = ends
        self.stdin, self.stdout = ends.wfd, ends.rfd  # the same socket for a connection
        self.mu = threading.Lock()
        self.cv = threading.Condition(self.mu)  # a reply was kept, the reader left, or stdout ended
        self.write_lock = threading.Lock()      # one request on stdin at a time
        self.waiting: Set[int] = set()          # ids whose callers wait (a reply for another id is dropped)
        self.kept: Dict[int, Result] = {}       # replies read by the reader for other callers
        self.reading = False                    # a thread is reading stdout
        self.sleepers = 0                       # threads waiting on cv
        self.partial = bytearray()              # stdout's unfinished line, owned by the reader
        self.exited = self.closing = self.stdin_closed = False
        self.returncode: Optional[int] = None
        if _POLL:
            self.poller = select.poll()  # stdout's, owned by the reader
            self.poller.register(self.stdout, _READ)
        else:
            # No poll() on a pipe here (Windows): one thread is the reader for good, and every caller waits
            # on the condition, its timeout included. Slower, but the same behaviour.
            self.reading = True
            threading.Thread(target=self._read_all, name="agui-state-reader", daemon=True).start()
        self.drain: Optional[threading.Thread] = None
        if logs is not None and isinstance(ends, Pipes):  # drain stderr so that the sidecar can never block on it; not on the reply path
            self.drain = threading.Thread(target=self._drain, args=(logs,), name="agui-state-stderr", daemon=True)
            self.drain.start()

    def _drain(self, logs: Deque[str]) -> None:
        assert isinstance(self.ends, Pipes) and self.ends.proc.stderr is not None
        with self.ends.proc.stderr:
            for line in self.ends.proc.stderr:
                logs.append(line.decode("utf-8", "replace").rstrip("\n"))

    def exit_error(self) -> SidecarExitedError:
        rc = self.returncode if self.exited else self.ends.status()
        return self.ends.error(rc, self.closing)

    # Reading: only the thread that set self.reading (under mu) calls these.

    def _read_all(self) -> None:
        while not self.exited:
            self._keep(self._read_some(None) or [])

    def _read_some(self, deadline: Optional[float]) -> Optional[List[Result]]:
        """Waits until stdout is readable (None: the deadline passed), reads what is there and returns
        the whole replies in it. At the end of stdout, marks the session exited and returns []."""
        if deadline is not None and not self.poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            return None
        try:
            chunk = self.ends.read(_CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            self._ended()
            return []
        if not self.partial and chunk[-1] == 10:  # whole lines, the usual case: one C-level split
            lines = chunk.split(b"\n")
            lines.pop()
        else:
            lines = self._split(chunk)
        return replies(lines[0]) if len(lines) == 1 else [r for line in lines for r in replies(line)]

    def _split(self, chunk: bytes) -> List[bytes]:
        """The complete lines that `chunk` ends (a reply may span many chunks: no length limit here)."""
        nl = chunk.rfind(b"\n")
        if nl < 0:
            self.partial += chunk  # amortized: a long reply is not copied again with each chunk
            return []
        self.partial += chunk[:nl]
        lines = bytes(self.partial).split(b"\n")
        self.partial = bytearray(chunk[nl + 1:])
        return lines

    def _ended(self) -> None:
        self._keep(replies(bytes(self.partial)))  # a last line without its newline
        try:
            rc: Optional[int] = self.ends.wait(_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            rc = None  # it closed stdout and lives on: the error says so
        with self.mu:
            self.returncode, self.exited = rc, True
            self._wake()

    def _keep(self, got: List[Result], mine: Optional[int] = None) -> Optional[Result]:
        """Keeps each reply for its waiting caller; returns the one for `mine`. A reply nobody waits for
        (its call timed out) is dropped."""
        own = None
        for r in got:
            if r["id"] == mine:
                own = r
                continue
            with self.mu:
                if r["id"] in self.waiting:
                    self.kept[r["id"]] = r
                    self._wake()
        return own

    def _wake(self) -> None:
        """Wakes every thread waiting on the condition (under mu); a notify costs, so only if one waits."""
        if self.sleepers:
            self.cv.notify_all()

    def _sleep(self, timeout: Optional[float]) -> bool:
        """Waits on the condition (under mu) until woken or `timeout` passes; False if it passed."""
        self.sleepers += 1
        try:
            return self.cv.wait(timeout)
        finally:
            self.sleepers -= 1

    def _await(self, msg_id: int, deadline: Optional[float]) -> Result:
        """A caller that was not free to read when it wrote: waits for its reply to be kept for it, or for
        the reader to leave, and then reads itself."""
        with self.mu:
            while True:
                if msg_id in self.kept:
                    self.waiting.discard(msg_id)
                    return self.kept.pop(msg_id)
                if self.exited:
                    self.waiting.discard(msg_id)
                    raise self.exit_error()
                if not self.reading:
                    self.reading = True
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self.waiting.discard(msg_id)
                    raise futures.TimeoutError()
                self._sleep(left)
        return self._read_own(msg_id, deadline)

    def _read_own(self, msg_id: int, deadline: Optional[float]) -> Result:
        """Reads stdout (this thread is the reader) until `msg_id`'s reply comes, keeping the others'."""
        try:
            while True:
                got = self._read_some(deadline)
                if got is None:
                    raise futures.TimeoutError()
                if len(got) == 1 and got[0]["id"] == msg_id:  # the usual case: one reply, this caller's
                    return got[0]
                own = self._keep(got, msg_id)
                if own is not None:
                    return own
                if self.exited:
                    with self.mu:  # the last line, without its newline, may have been this reply
                        if msg_id in self.kept:
                            return self.kept.pop(msg_id)
                    raise self.exit_error()
        finally:
            with self.mu:
                self.reading = False
                self.waiting.discard(msg_id)
                if self.sleepers:  # a waiting caller becomes the reader
                    self.cv.notify_all()

    def _write(self, data: bytes, reader: bool) -> None:
        """Writes the whole request (`reader`: this thread holds the reader's role). While the pipe is full,
        the sidecar may be blocked writing replies that nobody reads (late replies to timed-out calls, when
        no caller waits): then this thread reads them too, or the two processes would wait on each other."""
        try:
            n = self.ends.write(memoryview(data))
        except BlockingIOError:
            n = 0
        if n == len(data):
            return
        view = memoryview(data)[n:]
        while view:
            try:
                view = view[self.ends.write(view):]
                continue
            except BlockingIOError:
                pass
            read = reader
            if not reader:
                with self.mu:
                    read = not self.reading and not self.exited
                    self.reading = self.reading or read
            poller = select.poll()
            # One registration per fd: a connection reads and writes the same socket.
            poller.register(self.stdin, select.POLLOUT | (_READ if read and self.stdin == self.stdout else 0))
            if read and self.stdin != self.stdout:
                poller.register(self.stdout, _READ)
            try:
                if read and any(fd == self.stdout and ev & _READ for fd, ev in poller.poll()):
                    self._keep(self._read_some(None) or [])
                elif not read:
                    poller.poll(10)  # the reader drains stdout; check again soon whether it still does
            finally:
                if read and not reader:
                    with self.mu:
                        self.reading = False
                        self._wake()

    def call(self, msg_id: int, method: str, params: Mapping[str, Any], timeout: Optional[float]) -> Any:
        line = encode(msg_id, method, params)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.write_lock:  # the order is write_lock, then mu (as in _write and close)
            with self.mu:
                if self.exited:
                    raise self.exit_error()
                self.waiting.add(msg_id)  # for _ended: a last reply without its newline is kept by id
                reader = not self.reading  # free: this caller reads its own reply, with no wait on cv
                if reader:
                    self.reading = True
            try:
                if self.stdin_closed:  # closed: its fd may be another file's now
                    raise ValueError("stdin is closed")
                self._write(line, reader)
                written = True
            except (OSError, ValueError):  # broken pipe, or stdin already closed
                self._abandon(msg_id, reader)
                written = False
        if not written:  # waits for the exit status outside the write lock
            raise self._write_failed()
        reply = self._read_own(msg_id, deadline) if reader else self._await(msg_id, deadline)
        if "error" in reply:
            raise error_from_reply(reply["error"])
        return reply.get("result")

    def _abandon(self, msg_id: int, reader: bool) -> None:
        """A call whose request could not be written: it waits for nothing, and leaves the reader's role."""
        with self.mu:
            self.waiting.discard(msg_id)
            if reader:
                self.reading = False
                self._wake()

    def _write_failed(self) -> SidecarExitedError:
        try:
            self.ends.wait(_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            pass
        return self.ends.error(self.ends.status(), self.closing)

    def close(self, timeout: Optional[float]) -> None:
        self.closing = True
        with self.write_lock:
            self.stdin_closed = True
            try:
                self.ends.end_input()
            except OSError:
                pass
        try:
            self.ends.wait(timeout)
        except subprocess.TimeoutExpired:
            self.ends.kill()
            self.ends.wait(None)
        deadline = None if timeout is None else time.monotonic() + timeout
        # What the sidecar wrote on stderr before it exited is in logs() once close() returns, as
        # AsyncAguiState's close waits for its stderr: the drain reads the pipe to its end (bounded by the
        # timeout, for a pipe that a grandchild holds open).
        if self.drain is not None:
            self.drain.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        # Calls still waiting get the replies the sidecar wrote before it exited: read stdout to its end
        # for them (unless one of them is reading already), then close it.
        with self.mu:
            while self.reading and not self.exited:
                if not self._sleep(None if deadline is None else max(0.0, deadline - time.monotonic())):
                    if isinstance(self.ends, Connection):
                        self.ends.release(False)  # the reader wakes to the connection's end
                    return  # a reader is stuck on a pipe that a grandchild holds open: leave stdout to it
            if self.exited:
                mine = False
            else:
                mine = self.reading = True
        if mine:
            try:
                while not self.exited:
                    got = self._read_some(deadline)
                    if got is None:
                        break
                    self._keep(got)
            finally:
                with self.mu:
                    self.reading = False
                    self._wake()
        self.ends.release(self.exited)


class AguiState(Spawn, Methods[Result]):
    """A running agui-state sidecar; every method blocks until its reply.

    path: the executable; else $AGUI_STATE_BIN; else the binary bundled in the platform wheel;
        else `agui-state` on PATH.
    args: extra command-line arguments (e.g. ["--max-ops", "1000"]).
    env: the child's whole environment, as for subprocess.Popen (None: inherit).
    capture_logs: False lets the sidecar's stderr (pino JSON lines) go to ours;
        True drains it on a daemon thread into `logs()` (the last `log_lines`).
    timeout: default seconds to wait for each reply (None: wait as long as it takes).
    sidecar: the address of the host's shared sidecar, `unix:PATH` or `tcp:127.0.0.1:PORT` (else
        $AGUI_STATE_SIDECAR): connect to it rather than spawn one (protocol/README.md §2).
    sidecar_start: start the shared sidecar when nobody answers there (else $AGUI_STATE_SIDECAR_START=1):
        `agui-state serve --listen ADDRESS --exit-idle 60000 ARGS...`, detached.

    Any number of threads may call one AguiState at once; each reads its own reply (see the module).
    """

    def __init__(self, path: Optional[StrPath] = None, args: Sequence[str] = (),
                 env: Optional[Mapping[str, str]] = None, *, capture_logs: bool = False, log_lines: int = 1000,
                 timeout: Optional[float] = None, sidecar: Optional[str] = None,
                 sidecar_start: Optional[bool] = None) -> None:
        super().__init__(path, args, env, capture_logs=capture_logs, log_lines=log_lines, timeout=timeout,
                         sidecar=sidecar, sidecar_start=sidecar_start)
        self._lock = threading.Lock()
        self._session = self._open()

    def _open(self) -> _Session:
        ends = Connection(self.reach) if self.reach is not None else Pipes(self.argv, self.env, self._logs, _POLL)
        return _Session(ends, self._logs)

    def __enter__(self) -> "AguiState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        """The sidecar's process id. For a shared sidecar, as its Unix socket says (Linux); RuntimeError where
        nothing says it (loopback TCP)."""
        return self._session.ends.pid

    def close(self, timeout: Optional[float] = 5.0) -> None:
        """Close stdin, wait for the sidecar to answer what it has read and exit; kill it after `timeout`.
        A shared sidecar is left serving: only this connection ends, once what it sent is answered."""
        self._session.close(timeout)

    def restart(self, timeout: Optional[float] = 5.0) -> None:
        """Start a fresh sidecar (it knows no threads: call open_run with each thread's state). For a shared
        sidecar: connect again (in start mode, starting it when nobody answers); what it holds, it still holds."""
        with self._lock:
            self._session.close(timeout)
            self._session = self._open()

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
             timeout: Optional[float] = None) -> Result:
        """Send one request; return its result, or raise AguiStateError (a subclass chosen by code)."""
        # No lock: next() on an itertools.count and reading one attribute are each atomic under the GIL.
        result: Result = self._session.call(next(self._ids), method, {} if params is None else params,
                                            self.timeout if timeout is None else timeout)
        return result
