"""A client for the agui-state sidecar (JSON-RPC 2.0 over stdio). One file, standard library only.

One instance may be shared by many threads: writes are serialized under a lock, a reader
thread routes each reply to its caller by id, and every caller waits on its own id only.
"""
import collections
import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
from concurrent import futures

__all__ = ["AguiState", "AguiStateError", "UnknownThreadError", "PatchFailedError", "LimitExceededError",
           "VersionConflictError", "InvalidParamsError", "SidecarExitedError"]


class AguiStateError(Exception):
    """An error reply: `.code` (the JSON-RPC code), `.message`, `.data` (a dict, or None)."""

    def __init__(self, code, message, data=None):
        super().__init__(message if code is None else f"{message} [{code}] {json.dumps(data)}")
        self.code, self.message, self.data = code, message, data


class UnknownThreadError(AguiStateError):
    """-32001: the thread was never opened, was closed or evicted (`data["reason"]`). Call open_run again."""


class PatchFailedError(AguiStateError):
    """-32002: an atomic apply_ops failed; nothing changed. `data` is {code: <skip code>, index, message}."""


class LimitExceededError(AguiStateError):
    """-32003: a limit was exceeded; nothing changed. `data` is {code, limit, max, actual}."""


class VersionConflictError(AguiStateError):
    """-32004: `if_version` did not match; nothing changed. `data` is {code, expected, actual}."""


class InvalidParamsError(AguiStateError):
    """-32602: `data` is {code: "INVALID_PARAMS", field: <pointer into params>, reason}."""


class SidecarExitedError(AguiStateError):
    """The sidecar process is gone. `.returncode` is its exit status (negative: killed by a signal)."""

    def __init__(self, returncode, closed=False):
        text = f"agui-state exited with status {returncode}"
        if returncode is None:
            text = "agui-state closed its stdout"
        elif returncode < 0:
            sig = -returncode
            text += f" (signal {signal.Signals(sig).name if sig in signal.valid_signals() else sig})"
        super().__init__(None, text + (" after close()" if closed else ""), {"returncode": returncode})
        self.returncode = returncode


_BY_CODE = {
    -32001: UnknownThreadError, -32002: PatchFailedError, -32003: LimitExceededError,
    -32004: VersionConflictError, -32602: InvalidParamsError,
}


def _error(err):
    code = err.get("code")
    return _BY_CODE.get(code, AguiStateError)(code, err.get("message", ""), err.get("data"))


def _params(**kw):
    """snake_case keywords to the protocol's camelCase names (thread_id: threadId), leaving out None."""
    camel = {k: k.split("_")[0] + "".join(w.title() for w in k.split("_")[1:]) for k in kw}
    return {camel[k]: v for k, v in kw.items() if v is not None}


class _Session:
    """One sidecar process: its pipes, its pending calls (id -> Future) and its reader thread."""

    def __init__(self, argv, env, logs):
        stderr = subprocess.PIPE if logs is not None else None
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        self.pending = {}
        self.lock = threading.Lock()        # guards pending and exited
        self.write_lock = threading.Lock()  # one message on stdin at a time
        self.exited = self.closing = False
        self.returncode = None
        self.reader = threading.Thread(target=self._read, name="agui-state-reader", daemon=True)
        self.reader.start()
        if logs is not None:  # drain stderr so that the sidecar can never block on it
            threading.Thread(target=self._drain, args=(logs,), name="agui-state-stderr", daemon=True).start()

    def _drain(self, logs):
        with self.proc.stderr:
            for line in self.proc.stderr:
                logs.append(line.decode("utf-8", "replace").rstrip("\n"))

    def _read(self):
        try:
            for line in self.proc.stdout:
                try:
                    msg = json.loads(line) if line.strip() else None
                except ValueError:
                    continue
                for reply in msg if isinstance(msg, list) else [msg]:
                    if isinstance(reply, dict) and "id" in reply:
                        with self.lock:
                            fut = self.pending.pop(reply["id"], None)
                        if fut is not None:
                            fut.set_result(reply)
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

    def exit_error(self):
        rc = self.returncode if self.exited else self.proc.poll()
        return SidecarExitedError(rc, self.closing)

    def call(self, msg_id, method, params, timeout):
        # ASCII-escaped, so a lone surrogate from json.loads still travels; NaN and Infinity are refused here.
        line = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params},
                          allow_nan=False).encode("ascii") + b"\n"
        fut = futures.Future()
        with self.lock:
            if self.exited:
                raise self.exit_error()
            self.pending[msg_id] = fut
        try:
            with self.write_lock:
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
            raise _error(reply["error"])
        return reply.get("result")

    def close(self, timeout):
        self.closing = True
        with self.write_lock:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout)
        if not self.reader.is_alive():
            self.proc.stdout.close()


class AguiState:
    """A running agui-state sidecar.

    path: the executable; else $AGUI_STATE_BIN; else `agui-state` on PATH.
    args: extra command-line arguments (e.g. ["--max-ops", "1000"]).
    env: the child's whole environment, as for subprocess.Popen (None: inherit).
    capture_logs: False lets the sidecar's stderr (pino JSON lines) go to ours;
        True drains it on a daemon thread into `logs()` (the last `log_lines`).
    timeout: default seconds to wait for each reply (None: wait as long as it takes).
    """

    def __init__(self, path=None, args=(), env=None, *, capture_logs=False, log_lines=1000, timeout=None):
        exe = path or os.environ.get("AGUI_STATE_BIN") or shutil.which("agui-state") or "agui-state"
        self.argv = [os.fspath(exe), *args]
        self.env, self.timeout = env, timeout
        self._logs = collections.deque(maxlen=log_lines) if capture_logs else None
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._session = _Session(self.argv, self.env, self._logs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def pid(self):
        return self._session.proc.pid

    def logs(self):
        """The captured stderr lines (only with capture_logs=True)."""
        return list(self._logs or ())

    def close(self, timeout=5.0):
        """Close stdin, wait for the sidecar to answer what it has read and exit; kill it after `timeout`."""
        self._session.close(timeout)

    def restart(self, timeout=5.0):
        """Start a fresh sidecar (it knows no threads: call open_run with each thread's state)."""
        with self._lock:
            self._session.close(timeout)
            self._session = _Session(self.argv, self.env, self._logs)

    def call(self, method, params=None, *, timeout=None):
        """Send one request; return its result, or raise AguiStateError (a subclass chosen by code)."""
        with self._lock:
            msg_id, session = next(self._ids), self._session
        return session.call(msg_id, method, {} if params is None else params,
                            self.timeout if timeout is None else timeout)

    # The methods (protocol/README.md §6). Each returns the result dict; `events` is ready to forward.

    def open_run(self, thread_id, *, run_id=None, state=None, namespace=None, tool_state=None,
                 snapshot=False, if_version=None):
        return self.call("openRun", _params(thread_id=thread_id, run_id=run_id, state=state, namespace=namespace,
                                            tool_state=tool_state, snapshot=snapshot or None, if_version=if_version))

    def diff_tool_state(self, thread_id, *, tool_state=None, set=None, remove=None, if_version=None):
        return self.call("diffToolState", _params(thread_id=thread_id, tool_state=tool_state, set=set,
                                                  remove=None if remove is None else list(remove),
                                                  if_version=if_version))

    def apply_ops(self, thread_id, ops, *, atomic=False, if_version=None):
        return self.call("applyOps", _params(thread_id=thread_id, ops=list(ops), atomic=atomic or None,
                                             if_version=if_version))

    def normalize(self, ops, state=None):
        return self.call("normalize", _params(ops=list(ops), state=state))

    def diff_state(self, thread_id, value, *, path=None, if_version=None):
        # value is always sent: None means JSON null here.
        return self.call("diffState", {"threadId": thread_id, "value": value,
                                       **_params(path=path, if_version=if_version)})

    def get_state(self, thread_id, path=None):
        return self.call("getState", _params(thread_id=thread_id, path=path))

    def close_thread(self, thread_id):
        return self.call("closeThread", _params(thread_id=thread_id))

    def stats(self):
        return self.call("stats")
