"""The synchronous client: one reader thread per sidecar, callers block on their own reply."""
from __future__ import annotations

import os
import subprocess
import threading
from concurrent import futures
from typing import Any, Deque, Dict, Mapping, Optional, Sequence

from ._common import Methods, Result, StrPath, encode, Spawn, replies
from ._errors import SidecarExitedError, error_from_reply


class _Session:
    """One sidecar process: its pipes, its pending calls (id -> Future) and its reader thread."""

    def __init__(self, argv: Sequence[str], env: Optional[Mapping[str, str]], logs: Optional[Deque[str]]) -> None:
        stderr = subprocess.PIPE if logs is not None else None
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        self.pending: Dict[int, futures.Future[Result]] = {}
        self.lock = threading.Lock()        # guards pending and exited
        self.write_lock = threading.Lock()  # one message on stdin at a time
        self.exited = self.closing = False
        self.returncode: Optional[int] = None
        self.reader = threading.Thread(target=self._read, name="agui-state-reader", daemon=True)
        self.reader.start()
        if logs is not None:  # drain stderr so that the sidecar can never block on it
            threading.Thread(target=self._drain, args=(logs,), name="agui-state-stderr", daemon=True).start()

    def _drain(self, logs: Deque[str]) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            for line in self.proc.stderr:
                logs.append(line.decode("utf-8", "replace").rstrip("\n"))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:  # a line may be as long as it takes: no length limit here
                self._dispatch(line)
        except (OSError, ValueError):
            pass  # stdout was closed under us
        finally:
            try:
                self.returncode = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.returncode = None
            with self.lock:
                self.exited = True
                pending, self.pending = self.pending, {}
            for fut in pending.values():
                fut.set_exception(self.exit_error())

    def _dispatch(self, line: bytes) -> None:
        for reply in replies(line):
            with self.lock:
                fut = self.pending.pop(reply["id"], None)
            if fut is not None:
                fut.set_result(reply)

    def exit_error(self) -> SidecarExitedError:
        rc = self.returncode if self.exited else self.proc.poll()
        return SidecarExitedError(rc, self.closing)

    def call(self, msg_id: int, method: str, params: Mapping[str, Any], timeout: Optional[float]) -> Any:
        line = encode(msg_id, method, params)
        fut: futures.Future[Result] = futures.Future()
        with self.lock:
            if self.exited:
                raise self.exit_error()
            self.pending[msg_id] = fut
        try:
            with self.write_lock:
                assert self.proc.stdin is not None
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
        except (OSError, ValueError):  # broken pipe, or stdin already closed
            self.reader.join(5)
            with self.lock:
                self.pending.pop(msg_id, None)
            raise self.exit_error() from None
        try:
            reply = fut.result(timeout)
        except futures.TimeoutError:
            with self.lock:
                self.pending.pop(msg_id, None)
            raise
        if "error" in reply:
            raise error_from_reply(reply["error"])
        return reply.get("result")

    def close(self, timeout: Optional[float]) -> None:
        self.closing = True
        with self.write_lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout)
        if not self.reader.is_alive() and self.proc.stdout is not None:
            self.proc.stdout.close()


class AguiState(Spawn, Methods[Result]):
    """A running agui-state sidecar; every method blocks until its reply.

    path: the executable; else $AGUI_STATE_BIN; else the binary bundled in the platform wheel;
        else `agui-state` on PATH.
    args: extra command-line arguments (e.g. ["--max-ops", "1000"]).
    env: the child's whole environment, as for subprocess.Popen (None: inherit).
    capture_logs: False lets the sidecar's stderr (pino JSON lines) go to ours;
        True drains it on a daemon thread into `logs()` (the last `log_lines`).
    timeout: default seconds to wait for each reply (None: wait as long as it takes).
    """

    def __init__(self, path: Optional[StrPath] = None, args: Sequence[str] = (),
                 env: Optional[Mapping[str, str]] = None, *, capture_logs: bool = False, log_lines: int = 1000,
                 timeout: Optional[float] = None) -> None:
        super().__init__(path, args, env, capture_logs=capture_logs, log_lines=log_lines, timeout=timeout)
        self._lock = threading.Lock()
        self._session = _Session(self.argv, self.env, self._logs)

    def __enter__(self) -> "AguiState":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int:
        return self._session.proc.pid

    def close(self, timeout: Optional[float] = 5.0) -> None:
        """Close stdin, wait for the sidecar to answer what it has read and exit; kill it after `timeout`."""
        self._session.close(timeout)

    def restart(self, timeout: Optional[float] = 5.0) -> None:
        """Start a fresh sidecar (it knows no threads: call open_run with each thread's state)."""
        with self._lock:
            self._session.close(timeout)
            self._session = _Session(self.argv, self.env, self._logs)

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
             timeout: Optional[float] = None) -> Result:
        """Send one request; return its result, or raise AguiStateError (a subclass chosen by code)."""
        with self._lock:
            msg_id, session = next(self._ids), self._session
        result: Result = session.call(msg_id, method, {} if params is None else params,
                                      self.timeout if timeout is None else timeout)
        return result
