"""What the synchronous and the asyncio client share: finding the binary, encoding a request, and the
methods of protocol/README.md §6 and §10 (activities), written once over an abstract `call`."""
from __future__ import annotations

import collections
import itertools
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any, Deque, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, TypeVar, Union

JSON = Any
"""Any value the json module maps to JSON: dict, list, str, int, float, bool or None."""

Result = Dict[str, Any]
"""A method's result object, exactly as protocol/openrpc.json describes it."""

StrPath = Union[str, "os.PathLike[str]"]

BUNDLED = Path(__file__).resolve().parent / "bin" / "agui-state"
"""Where the platform wheel puts the sidecar. Absent when the package comes from the source tree."""


def find_binary(path: Optional[StrPath] = None) -> str:
    """The sidecar to run: `path`, else $AGUI_STATE_BIN, else the bundled binary, else `agui-state` on PATH.

    Raises FileNotFoundError, naming every place looked at, when none of them gives a file.
    """
    if path:
        return os.fspath(path)
    from_env = os.environ.get("AGUI_STATE_BIN")
    if from_env:
        return from_env
    if BUNDLED.is_file():
        _ensure_executable(BUNDLED)
        return str(BUNDLED)
    on_path = shutil.which("agui-state")
    if on_path:
        return on_path
    raise FileNotFoundError(
        "agui-state: no sidecar found. Looked at: the `path` argument (not given), $AGUI_STATE_BIN (not set), "
        f"the bundled binary {BUNDLED} (absent: this is not the platform wheel), `agui-state` on PATH (none). "
        "Install the platform wheel, or pass the path of dist/agui-state.")


class Spawn:
    """How a client starts its sidecar and what it keeps beside it, the same for AguiState and
    AsyncAguiState: the command line, the child's environment, the default reply timeout, the captured
    stderr lines and the request ids."""

    def __init__(self, path: Optional[StrPath], args: Sequence[str], env: Optional[Mapping[str, str]], *,
                 capture_logs: bool, log_lines: int, timeout: Optional[float]) -> None:
        self.argv = [find_binary(path), *args]
        self.env, self.timeout = env, timeout
        self._logs: Optional[Deque[str]] = collections.deque(maxlen=log_lines) if capture_logs else None
        self._ids = itertools.count(1)

    def logs(self) -> List[str]:
        """The captured stderr lines (only with capture_logs=True)."""
        return list(self._logs or ())


def _ensure_executable(file: Path) -> None:
    # pip keeps the executable bit that the wheel records; an installer that drops it (or a copy made by
    # hand) would leave a file that cannot be spawned, so set it here once rather than fail with EACCES.
    if os.access(file, os.X_OK):
        return
    try:
        file.chmod(file.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    except OSError as e:
        raise PermissionError(f"the bundled sidecar {file} is not executable and cannot be made so: {e}") from e


def encode(msg_id: int, method: str, params: Mapping[str, Any]) -> bytes:
    """One request as a line. ASCII-escaped, so a lone surrogate from json.loads still travels; NaN and
    Infinity raise ValueError here, before anything is sent."""
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params},
                      allow_nan=False).encode("ascii") + b"\n"


class LineSplitter:
    """Bytes in, complete lines out, with no length limit (a reply may be as large as the sidecar's
    --max-message-bytes, far beyond asyncio's 64 KiB readline limit). Each chunk is scanned once."""

    def __init__(self) -> None:
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> List[bytes]:
        lines: List[bytes] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._partial += chunk[start:]
                return lines
            if self._partial:
                self._partial += chunk[start:nl]
                lines.append(bytes(self._partial))
                self._partial.clear()
            else:
                lines.append(chunk[start:nl])
            start = nl + 1

    def rest(self) -> bytes:
        """What followed the last newline: a final line without one."""
        return bytes(self._partial)


def replies(line: bytes) -> List[Dict[str, Any]]:
    """The replies in one line of stdout (a batch is an array); anything that is not JSON is skipped."""
    try:
        msg = json.loads(line) if line.strip() else None
    except ValueError:
        return []
    return [r for r in (msg if isinstance(msg, list) else [msg]) if isinstance(r, dict) and "id" in r]


def _params(**kw: Any) -> Dict[str, Any]:
    """snake_case keywords to the protocol's camelCase names (thread_id: threadId), leaving out None."""
    camel = {k: k.split("_")[0] + "".join(w.title() for w in k.split("_")[1:]) for k in kw}
    return {camel[k]: v for k, v in kw.items() if v is not None}


R = TypeVar("R")


class Methods(Generic[R]):
    """The protocol's methods over `call`. R is what `call` returns: a result dict for AguiState, a
    coroutine that gives one for AsyncAguiState. Each method returns the result dict; its `events` are
    ready to forward to the AG-UI client."""

    def call(self, method: str, params: Optional[Mapping[str, Any]] = None, *,
             timeout: Optional[float] = None) -> R:
        raise NotImplementedError

    def open_run(self, thread_id: str, *, run_id: Optional[str] = None, state: Optional[Dict[str, JSON]] = None,
                 namespace: Optional[str] = None, tool_state: Optional[Dict[str, JSON]] = None,
                 snapshot: bool = False, if_version: Optional[int] = None) -> R:
        """openRun: start a run; creates or resynchronizes the thread. {threadId, version, delta, events, runId?}."""
        return self.call("openRun", _params(thread_id=thread_id, run_id=run_id, state=state, namespace=namespace,
                                            tool_state=tool_state, snapshot=snapshot or None, if_version=if_version))

    def diff_tool_state(self, thread_id: str, *, tool_state: Optional[Dict[str, JSON]] = None,
                        set: Optional[Dict[str, JSON]] = None, remove: Optional[Iterable[str]] = None,
                        if_version: Optional[int] = None) -> R:
        """diffToolState: the per-key diff of the namespace map (tool_state, or set/remove). {version, delta, events}"""
        return self.call("diffToolState", _params(thread_id=thread_id, tool_state=tool_state, set=set,
                                                  remove=None if remove is None else list(remove),
                                                  if_version=if_version))

    def apply_ops(self, thread_id: str, ops: Iterable[Dict[str, JSON]], *, atomic: bool = False,
                  if_version: Optional[int] = None) -> R:
        """applyOps: normalize and apply RFC 6902 ops to the state. {version, delta, skipped, events}."""
        return self.call("applyOps", _params(thread_id=thread_id, ops=list(ops), atomic=atomic or None,
                                             if_version=if_version))

    def normalize(self, ops: Iterable[Dict[str, JSON]], state: Optional[Dict[str, JSON]] = None) -> R:
        """normalize: the ops as apply_ops would emit them against `state` (default {}); touches no thread."""
        return self.call("normalize", _params(ops=list(ops), state=state))

    def diff_state(self, thread_id: str, value: JSON, *, path: Optional[str] = None,
                   if_version: Optional[int] = None) -> R:
        """diffState: set the state at `path` to `value`; the minimal delta. {version, delta, events}."""
        # value is always sent: None means JSON null here, not "leave it out". (So is an activity's content.)
        return self.call("diffState", {"threadId": thread_id, "value": value,
                                       **_params(path=path, if_version=if_version)})

    def get_state(self, thread_id: str, path: Optional[str] = None) -> R:
        """getState: {version, state}, the state at `path` (default: the whole state)."""
        return self.call("getState", _params(thread_id=thread_id, path=path))

    # Activities (protocol/README.md §10): AG-UI ACTIVITY_SNAPSHOT / ACTIVITY_DELTA messages, keyed by
    # message_id inside a thread. They share the thread's version and limits, survive open_run, and go
    # with close_thread. An activity the thread does not hold raises UnknownActivityError (-32005).

    def activity_snapshot(self, thread_id: str, message_id: str, activity_type: str, content: Dict[str, JSON], *,
                          replace: bool = True, if_version: Optional[int] = None) -> R:
        """activitySnapshot: create the activity, or replace its type and content.

        With replace=False an existing activity is left exactly as it is (and a missing one is created);
        the one ACTIVITY_SNAPSHOT event then carries what the mirror holds, with "replace": False. The event
        is returned even when nothing changed, so this is also how to resynchronize a client.
        Returns {version, events}. `content` must be a dict (else InvalidParamsError, reason
        ROOT_NOT_OBJECT); it is always sent, and None inside it is JSON null.
        """
        return self.call("activitySnapshot", {
            **_params(thread_id=thread_id, message_id=message_id, activity_type=activity_type), "content": content,
            **_params(replace=None if replace or replace is None else False, if_version=if_version)})

    def apply_activity_ops(self, thread_id: str, message_id: str, ops: Iterable[Dict[str, JSON]], *,
                           activity_type: Optional[str] = None, atomic: bool = False,
                           if_version: Optional[int] = None) -> R:
        """applyActivityOps: normalize and apply RFC 6902 ops to the activity's content, as apply_ops does
        to a thread's state (same skips; an op that would make the content a non-object is skipped with
        ROOT_NOT_OBJECT). `activity_type`, when given and different, retypes the activity.

        Returns {version, delta, skipped, events}: events is one ACTIVITY_DELTA (patch = delta, with the
        type after the call; an empty patch for a retype alone), or [] when nothing moved. Raises
        UnknownActivityError when the thread does not hold the activity, and PatchFailedError when
        atomic=True and an op does not apply (nothing is patched or retyped then).
        """
        return self.call("applyActivityOps", _params(thread_id=thread_id, message_id=message_id, ops=list(ops),
                                                     activity_type=activity_type, atomic=atomic or None,
                                                     if_version=if_version))

    def diff_activity(self, thread_id: str, message_id: str, content: Dict[str, JSON], *,
                      activity_type: Optional[str] = None, if_version: Optional[int] = None) -> R:
        """diffActivity: set the activity's content and return the minimal ACTIVITY_DELTA from the old one.

        An activity the thread does not hold is created and the event is an ACTIVITY_SNAPSHOT (delta []);
        `activity_type` is required then (else InvalidParamsError, reason MISSING). Later it may be left
        out (the type stays) or given (a different one retypes). Equal content and type give events [].
        Returns {version, delta, events}. `content` is always sent; None inside it is JSON null.
        """
        return self.call("diffActivity", {
            **_params(thread_id=thread_id, message_id=message_id), "content": content,
            **_params(activity_type=activity_type, if_version=if_version)})

    def get_activity(self, thread_id: str, message_id: str) -> R:
        """getActivity: {version, activityType, content}. Raises UnknownActivityError if it is not held."""
        return self.call("getActivity", _params(thread_id=thread_id, message_id=message_id))

    def close_thread(self, thread_id: str) -> R:
        """closeThread: forget the thread and its activities. {closed: bool}; an unknown id is not an error."""
        return self.call("closeThread", _params(thread_id=thread_id))

    def escape_pointer(self, path: Iterable[Union[str, int]]) -> R:
        """escapePointer: {pointer}, the RFC 6901 pointer for raw segments (["a/b", 0] gives "/a~1b/0")."""
        return self.call("escapePointer", {"path": list(path)})

    def parse_pointer(self, pointer: str) -> R:
        """parsePointer: {path}, the raw (unescaped) string segments of an RFC 6901 pointer."""
        return self.call("parsePointer", {"pointer": pointer})

    def stats(self) -> R:
        """stats: {threads, stateBytes, requests, uptimeMs, limits, version, evicted, activities}."""
        return self.call("stats")

    def discover(self) -> R:
        """rpc.discover: the OpenRPC document the sidecar serves (protocol/openrpc.json plus its examples)."""
        return self.call("rpc.discover")
