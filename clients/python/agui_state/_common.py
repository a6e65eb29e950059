"""What the synchronous and the asyncio client share: finding the binary, and the
methods of protocol/README.md §6 and §10 (activities), written once over an abstract `call`."""
from __future__ import annotations

import collections
import itertools
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any, Deque, Dict, Generic, Iterable, List, Mapping, Optional, Sequence, TypeVar, Union

JSON = Any
"""Any value the json module maps to JSON: dict, list, str, int, float, bool or None."""

Result = Dict[str, Any]
"""A method's result object, exactly as protocol/openrpc.json describes it."""

StrPath = Union[str, "os.PathLike[str]"]

BUNDLED = Path(__file__).resolve().parent / "bin" / ("agui-state.exe" if os.name == "nt" else "agui-state")
"""Where a platform wheel puts the sidecar. Absent in the pure py3-none-any wheel and in the source tree."""


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
        f"the bundled binary {BUNDLED} (absent: this is the pure wheel or a source checkout, which carry none), "
        "`agui-state` on PATH (none). Install a platform wheel where one fits (Linux x86-64 or arm64, Windows "
        "x64, macOS x86-64), or the npm package agui-state-sidecar (Node.js 20 or later), "
        "which puts `agui-state` on PATH, or set AGUI_STATE_BIN to the sidecar's path.")


class Spawn:
    """How a client starts its sidecar and what it keeps beside it, the same for AguiState and
    AsyncAguiState: the command line, the child's environment, the default reply timeout, the captured
    stderr lines and the request ids.

    With `sidecar` (else AGUI_STATE_SIDECAR) naming an address, `unix:PATH` or `tcp:127.0.0.1:PORT`, the client
    connects to the host's shared sidecar there instead (`reach`; protocol/README.md §2, "One sidecar per host").
    With `sidecar_start` (else AGUI_STATE_SIDECAR_START=1) too, a client that finds nobody there starts it:
    `agui-state serve --listen ADDRESS --exit-idle 60000 ARGS...`, detached. `args` go only to a sidecar this
    client starts: given with an address and no start mode, they are a ValueError (CONFLICTING_OPTIONS). A bad address is a ValueError here."""

    def __init__(self, path: Optional[StrPath], args: Sequence[str], env: Optional[Mapping[str, str]], *,
                 capture_logs: bool, log_lines: int, timeout: Optional[float], sidecar: Optional[str] = None,
                 sidecar_start: Optional[bool] = None) -> None:
        from ._address import resolve, unstarted
        from ._starting import Reach, start_argv
        who = type(self).__name__
        shared = resolve(sidecar, sidecar_start, who)
        self.address: Optional[str] = None if shared is None else shared.address.text
        """The shared sidecar's address, or None: this client spawns a sidecar of its own."""
        self.reach: Optional[Reach] = None
        if shared is None:
            self.argv = [find_binary(path), *args]
        elif shared.start:
            self.argv = start_argv(find_binary(path), shared.address, args)
        elif args:
            raise unstarted(who, [f"args {list(args)!r}"], shared.address)
        else:
            self.argv = []
        if shared is not None:
            self.reach = Reach(shared, self.argv, env)
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


_CAMEL: Dict[str, str] = {}
"""snake_case keyword -> camelCase name, filled as keywords are first seen (every method pays for
_params on every call: spelling each name anew cost as much as encoding the request)."""


def _camel(k: str) -> str:
    name = _CAMEL[k] = k.split("_")[0] + "".join(w.title() for w in k.split("_")[1:])
    return name


def _params(**kw: Any) -> Dict[str, Any]:
    """snake_case keywords to the protocol's camelCase names (thread_id: threadId), leaving out None."""
    return {_CAMEL.get(k) or _camel(k): v for k, v in kw.items() if v is not None}


_NOT_A_SEQUENCE = (str, bytes, bytearray, memoryview, Mapping)

Segment = Union[str, int]
PointerOrPath = Union[str, Iterable[Segment]]
"""An RFC 6901 pointer ("/a~1b/0"), or a Path: its raw segments (["a/b", 0]). protocol/openrpc.json."""


def _sequence(method: str, name: str, value: Any, items: str, *, pointer: bool = False) -> Any:
    """`value` as a list, for a parameter documented as a sequence (with pointer=True, a pointer str is
    also one, and is returned as it is). A str, bytes or Mapping is iterable, but by letters, byte values
    or keys: remove="plain" would remove p, l, a, i, n, and one op dict given as ops would go as three ops
    made of its keys. So those, and whatever is not iterable, raise TypeError naming the Python method and
    the parameter, before anything is sent."""
    if pointer and isinstance(value, str):
        return value
    if isinstance(value, _NOT_A_SEQUENCE) or not isinstance(value, Iterable):
        what = f"a str pointer or a sequence of {items}" if pointer else f"a sequence of {items}"
        raise TypeError(f"{method}(): {name} must be {what}, not {type(value).__name__}")
    return list(value)


def _optional_sequence(method: str, name: str, value: Any, items: str, *, pointer: bool = False) -> Any:
    """As _sequence, with None left as None (a param that is not sent)."""
    return None if value is None else _sequence(method, name, value, items, pointer=pointer)


_OPS = "op dicts"
_SEGMENTS = "str or int segments"

R = TypeVar("R")


class Methods(Generic[R]):
    """The protocol's methods over `call`. R is what `call` returns: a result dict for AguiState, a
    coroutine that gives one for AsyncAguiState. Each method returns the result dict; its `events` are
    ready to forward to the AG-UI client.

    A parameter documented as a sequence (ops, remove, a path of segments) takes a list, a tuple or any
    other iterable of its items, and raises TypeError, naming the method and the parameter, for a str,
    bytes or Mapping (or anything not iterable) given there: see _sequence."""

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
        remove = _optional_sequence("diff_tool_state", "remove", remove, "str")
        return self.call("diffToolState", _params(thread_id=thread_id, tool_state=tool_state, set=set,
                                                  remove=remove, if_version=if_version))

    def apply_ops(self, thread_id: str, ops: Iterable[Dict[str, JSON]], *, atomic: bool = False,
                  if_version: Optional[int] = None) -> R:
        """applyOps: normalize and apply RFC 6902 ops to the state. {version, delta, skipped, events}."""
        ops = _sequence("apply_ops", "ops", ops, _OPS)
        return self.call("applyOps", _params(thread_id=thread_id, ops=ops, atomic=atomic or None,
                                             if_version=if_version))

    def normalize(self, ops: Iterable[Dict[str, JSON]], state: Optional[Dict[str, JSON]] = None) -> R:
        """normalize: the ops as apply_ops would emit them against `state` (default {}); touches no thread."""
        return self.call("normalize", _params(ops=_sequence("normalize", "ops", ops, _OPS), state=state))

    def diff_state(self, thread_id: str, value: JSON, *, path: Optional[PointerOrPath] = None,
                   if_version: Optional[int] = None) -> R:
        """diffState: set the state at `path` to `value`; the minimal delta. {version, delta, events}."""
        # value is always sent: None means JSON null here, not "leave it out". (So is an activity's content.)
        path = _optional_sequence("diff_state", "path", path, _SEGMENTS, pointer=True)
        return self.call("diffState", {"threadId": thread_id, "value": value,
                                       **_params(path=path, if_version=if_version)})

    def get_state(self, thread_id: str, path: Optional[PointerOrPath] = None) -> R:
        """getState: {version, state}, the state at `path` (default: the whole state)."""
        path = _optional_sequence("get_state", "path", path, _SEGMENTS, pointer=True)
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
        ops = _sequence("apply_activity_ops", "ops", ops, _OPS)
        return self.call("applyActivityOps", _params(thread_id=thread_id, message_id=message_id, ops=ops,
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

    # Streams (protocol/README.md §14): the repair `agui-state fix` does, fed part by part by a server
    # middleware (agui_state.asgi). A stream that is unknown, closed or evicted raises UnknownStreamError.

    def open_stream(self, *, state: Optional[Dict[str, JSON]] = None, own: Optional[Iterable[str]] = None,
                    snapshots: Optional[str] = None, join_keys: bool = False, lifecycle: Optional[str] = None,
                    resync: bool = False, framing: Optional[str] = None,
                    resume: Union[bool, Dict[str, JSON], None] = None, request: Optional[Dict[str, JSON]] = None,
                    response: Optional[Dict[str, JSON]] = None) -> R:
        """openStream. own, snapshots ("pass" or "delta") and join_keys are `fix --own`, `--snapshots`,
        `--join-keys`, lifecycle ("repair", or "pass", the sidecar's default) `fix --lifecycle`: whether a run's
        lifecycle faults are mended (protocol/README.md §13). resync: the client may hold more than the
        baseline (a stream opened again on a new sidecar without its replay, §14): under own, each run's first
        owned write is sent whole. What a middleware passes (protocol/README.md §14): `request` ({method, path, headers,
        body?}: the request as received, its header pairs, and its body as text when the whole of it was
        kept) and `response` ({status, headers}: the app's response head); `resume=False` when the
        middleware's resume is off. The sidecar then decides the framing, the baseline and the headers:
        {pass: {code, message}} when the response is not one to repair (pass it on untouched), else
        {streamId, headers, replayBytes, baseline?, run?, opening?}: `headers` are the response head's pairs
        to write in place of the app's, `opening` the id block to write right after the head, before any text.
        The earlier form: `state` (the baseline, RunAgentInput.state), `framing` ("sse" or "ndjson"; None:
        told apart from the first line) and a `resume` dict ({threadId?, messages?, path, requestHeaders,
        responseHeaders}) that files the stream as a resumable run; {streamId, run?, opening?, headers?}."""
        own = _optional_sequence("open_stream", "own", own, "str")
        return self.call("openStream", _params(state=state, own=own, snapshots=snapshots,
                                               join_keys=join_keys or None, lifecycle=lifecycle,
                                               resync=resync or None, framing=framing, resume=resume,
                                               request=request, response=response))

    def fix_stream(self, stream_id: str, text: str) -> R:
        """fixStream: {text, findings, passed, mended, discarded, kept, pending?, head?}: the repaired text of
        every event `text` (the next part of the stream, cut anywhere but never inside a character) completes,
        their findings (protocol/README.md §13, each with its outcome), and those counted by outcome.
        `pending`: how many UTF-8 bytes at the end of all the text given so far no reply has answered for yet
        (what a middleware keeps to fail open with); `head`, once: the bytes from the stream's start up to and
        including its first event, when that is a RUN_STARTED (what it keeps past replayBytes).
        After detach_stream the text is "" and the reply carries `cancel`: true once the grace passed with
        nobody reading the run (then cancel the app and call close_stream)."""
        return self.call("fixStream", {"streamId": stream_id, "text": text})

    def close_stream(self, stream_id: str, *, broken: bool = False) -> R:
        """closeStream: {text, findings, summary, ended}: the rest of the output, the findings of the events it
        completes, and the whole stream counted. `ended`: the stream stopped inside a run and `text` ends it
        (its closes and a RUN_ERROR with code INCOMPLETE_STREAM): write it, then end the response cleanly,
        even when the app broke off. The stream is forgotten. `broken`: the app's response broke off rather than ended (a resumable run then ends
        as cancelled, and a rejoin of it is broken off too)."""
        return self.call("closeStream", _params(stream_id=stream_id, broken=broken or None))

    # Resume (protocol/README.md §16): a stream opened with `resume` outlives its client for the grace
    # period, and a rejoin or a reload is answered from the sidecar's run log without calling the app.

    def detach_stream(self, stream_id: str) -> R:
        """detachStream: {graceMs}. The stream's client left mid-run: keep feeding the app's output with
        fix_stream (its text is then ""), at least every graceMs (text "" when the app wrote nothing), until
        a reply says `cancel`. graceMs 0: not resumable, cancel now. UnknownStreamError for an unknown id."""
        return self.call("detachStream", {"streamId": stream_id})

    def classify_request(self, method: str, path: str, headers: Iterable[Sequence[str]],
                         paths: Optional[Iterable[str]] = None, resume: Optional[bool] = None) -> R:
        """classifyRequest: {kind, handled, bodyBytes?}, what a request a middleware received is (protocol/README.md
        §16): `handled` false: the app's, untouched; else `kind` "rejoin" or "reload" (answer it with
        rejoin_stream) or "forward" (the app's, its body teed up to `bodyBytes` for open_stream). `headers` are
        the request's header pairs, [name, value] as received (any case, repeats kept); `paths` the middleware's
        option as the user gave it (None: every path), `resume` False when its resume is off."""
        pairs = [list(p) for p in _sequence("classify_request", "headers", headers, "name and value pairs")]
        paths = _optional_sequence("classify_request", "paths", paths, "str")
        return self.call("classifyRequest", {"method": method, "path": path, "headers": pairs,
                                             **_params(paths=paths, resume=resume)})

    def rejoin_stream(self, request: Optional[Dict[str, JSON]] = None, *, thread_id: Optional[str] = None,
                      path: Optional[str] = None, authorization: Optional[str] = None, cookie: Optional[str] = None,
                      last_event_id: Optional[str] = None) -> R:
        """rejoinStream: {readId, status, headers}, the read of a run to answer a rejoin or a reload with: the
        status and headers to answer with (the run's own, with the announcement), then read_rejoin's text.
        `request` ({method, path, headers, body}: the request as received, its header pairs and its body as
        text) is what a middleware passes: the sidecar tells a rejoin (Last-Event-ID: the events after it,
        then the tail) from a reload (POST <path>/connect: the thread's latest run from RUN_STARTED) and
        checks who asks. (The keywords are the earlier form, by the same rules: the body's threadId, the agent
        path, the Authorization and Cookie headers, the Last-Event-ID.)
        Raises ResumeUnknownError when there is nothing to rejoin: its `.status`, `.headers` and `.body` are
        the answer to write."""
        return self.call("rejoinStream", _params(request=request, thread_id=thread_id, path=path,
                                                 authorization=authorization, cookie=cookie,
                                                 last_event_id=last_event_id))

    def read_rejoin(self, read_id: str, *, wait_ms: Optional[int] = None) -> R:
        """readRejoin: {text, done, end?}: the run's next events as SSE with their ids (one page at most),
        written to the client as they are; answers once there is one, the run ended, or wait_ms passed (left
        out: the sidecar's default, what a middleware passes). With done,
        `end` is "finished" (end the response) or "cancelled", "evicted", "unresumable" (break it off).
        Raises UnknownReadError for an unknown read. The client's reply timeout is lengthened by the wait."""
        limit: Optional[float] = getattr(self, "timeout", None)
        if limit is not None:  # the sidecar holds the reply for up to wait_ms by design
            limit += (1000 if not isinstance(wait_ms, int) else max(wait_ms, 0)) / 1000
        return self.call("readRejoin", _params(read_id=read_id, wait_ms=wait_ms), timeout=limit)

    def close_rejoin(self, read_id: str) -> R:
        """closeRejoin: {closed: true}. The rejoin's client left: the read is forgotten. UnknownReadError
        for an unknown read."""
        return self.call("closeRejoin", {"readId": read_id})

    def escape_pointer(self, path: Iterable[Segment]) -> R:
        """escapePointer: {pointer}, the RFC 6901 pointer for raw segments (["a/b", 0] gives "/a~1b/0")."""
        return self.call("escapePointer", {"path": _sequence("escape_pointer", "path", path, _SEGMENTS)})

    def parse_pointer(self, pointer: str) -> R:
        """parsePointer: {path}, the raw (unescaped) string segments of an RFC 6901 pointer."""
        return self.call("parsePointer", {"pointer": pointer})

    def stats(self) -> R:
        """stats: {threads, stateBytes, requests, uptimeMs, limits, version, evicted, activities}."""
        return self.call("stats")

    def discover(self) -> R:
        """rpc.discover: the OpenRPC document the sidecar serves (protocol/openrpc.json plus its examples)."""
        return self.call("rpc.discover")


# The wrappers by the protocol name they call, where the two differ (openRun: open_run). Read from Methods
# itself, so a new wrapper is in here without a second list to keep.
_WRAPPERS = {wire: name for wire, name in (
    (name.split("_")[0] + "".join(w.title() for w in name.split("_")[1:]), name)
    for name in vars(Methods) if not name.startswith("_") and name != "call") if wire != name}
# A quoted string is the caller's data (a thread id, a key, a pointer) and is left as it is.
_WIRE_NAME = re.compile(r'("(?:[^"\\]|\\.)*")|\b(' + "|".join(sorted(_WRAPPERS, key=len, reverse=True)) + r")\b")


def python_names(text: str) -> str:
    """`text` with each protocol method name outside quotes replaced by the Python method that calls it:
    the sidecar's messages say "call openRun with the state again", and a Python caller looks for open_run."""
    return _WIRE_NAME.sub(lambda m: m.group(1) or _WRAPPERS[m.group(2)], text)
