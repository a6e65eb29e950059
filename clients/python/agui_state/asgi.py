"""ASGI middleware: the repair `agui-state fix` does (protocol/README.md §13), inside the server, through the
sidecar's stream methods (§14), for servers whose events a framework writes (issue 24):

    app.add_middleware(AguiStateMiddleware, own=["/toolState"])     # FastAPI or Starlette

It is plain ASGI 3 and imports no framework. The sidecar starts with the app (ASGI lifespan), or on the first
stream where the server sends no lifespan events, and is started again when it dies, the streams it was
repairing resumed on the new one. It fails open: whatever happens to the sidecar, the response reaches the
client, unrepaired from the point where it cannot be repaired, with a warning on the `agui_state.asgi`
logger; the findings of each stream are said there at INFO.
"""
from __future__ import annotations

import collections
import json
import re
from typing import Any, Awaitable, Callable, Deque, Iterable, List, MutableMapping, Optional, Tuple

from ._async import AsyncAguiState
from ._fixing import FixedBody
from ._lifespan import Lifespan
from ._sidecar import PROCESS, SharedSidecar, log

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_SSE = re.compile(rb"^\s*text/event-stream\s*(;|$)", re.I)
_NDJSON = re.compile(rb"^\s*application/(x-ndjson|jsonl)\s*(;|$)", re.I)


class AguiStateMiddleware:
    """Repairs every AG-UI event stream the app answers with (text/event-stream, application/x-ndjson,
    application/jsonl), as `agui-state fix` with the same options would: `own` (escaped pointers such as
    "/toolState": the server owns those members, the client everything else), `snapshots` ("pass" or
    "delta") and `join_keys`. The baseline is the request's RunAgentInput.state.

    `sidecar`: an AsyncAguiState to use (started here if it is not); by default one process serves every
    middleware of the Python process, started at the app's lifespan startup (or, without one, on the
    first stream) and closed at its shutdown. `paths`: only requests whose path is
    one of these, or lies below one, are handled; by default all are. Every other response passes
    untouched. Put it inside any compression middleware (added before it), so that it sees plain text.
    """

    def __init__(self, app: ASGIApp, *, own: Iterable[str] = (), snapshots: Optional[str] = None,
                 join_keys: bool = False, sidecar: Optional[AsyncAguiState] = None,
                 paths: Optional[Iterable[str]] = None) -> None:
        self.app = app
        owned = [] if isinstance(own, (str, bytes)) else list(own)
        if isinstance(own, (str, bytes)) or not all(isinstance(p, str) and p.startswith("/") for p in owned):
            raise TypeError(f"AguiStateMiddleware: own must be a sequence of JSON Pointers such as "
                            f"'/toolState', not {own!r}")
        if snapshots not in (None, "pass", "delta"):
            raise ValueError(f"AguiStateMiddleware: snapshots must be 'pass' or 'delta', not {snapshots!r}")
        listed = None if paths is None or isinstance(paths, (str, bytes)) else list(paths)
        if paths is not None and (listed is None or not all(isinstance(p, str) for p in listed)):
            raise TypeError(f"AguiStateMiddleware: paths must be a sequence of str, not {paths!r}")
        self.policy = {"own": owned or None, "snapshots": snapshots, "join_keys": bool(join_keys)}
        self.paths = None if listed is None else [p.rstrip("/") or "/" for p in listed]
        self.sidecar = PROCESS if sidecar is None else SharedSidecar(sidecar)

    def _handles(self, path: str) -> bool:
        if self.paths is None:
            return True
        return any(path == p or path.startswith(p if p.endswith("/") else p + "/") for p in self.paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await Lifespan(self.app, self.sidecar, receive, send).run(scope)
        elif scope["type"] != "http" or not self._handles(scope.get("path", "")):
            await self.app(scope, receive, send)
        else:
            exchange = _Exchange(self, scope, receive, send)
            await exchange.read_request()
            try:
                await self.app(scope, exchange.receive, exchange.send)
            finally:
                exchange.finish()


def _framing(headers: Iterable[Tuple[bytes, bytes]]) -> Tuple[Optional[str], bool]:
    """The stream's framing by its Content-Type ("sse", "ndjson", or None: not a stream), and whether it is
    content-encoded (gzip and the like: then it is not ours to read)."""
    framing, encoded = None, False
    for name, value in headers:
        name = name.lower()
        if name == b"content-type":
            framing = "sse" if _SSE.match(value) else "ndjson" if _NDJSON.match(value) else None
        elif name == b"content-encoding":
            encoded = value.strip().lower() not in (b"", b"identity")
    return framing, encoded


def _baseline(body: bytes, scope: Scope) -> Tuple[Optional[Any], Optional[str]]:
    """RunAgentInput.state from the request body (None: leave it out, the sidecar starts from {}), and why
    it could not be read, when that is so."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
            return None, "the request body is content-encoded"
    if not body:
        return None, None
    try:
        run_input = json.loads(body)
    except ValueError:
        return None, "the request body is not JSON"
    state = run_input.get("state") if isinstance(run_input, dict) else None
    if state is None or isinstance(state, dict):
        return state, None
    return None, "RunAgentInput.state is not an object"


class _Exchange:
    """One request and its response: the body read for its state and handed on, and the response's
    event stream, if it is one, repaired on its way out."""

    def __init__(self, mw: AguiStateMiddleware, scope: Scope, receive: Receive, send: Send) -> None:
        self.mw, self.scope, self.down_receive, self.down_send = mw, scope, receive, send
        self.replay: Deque[Message] = collections.deque()
        self.body = b""
        self.stream: Optional[FixedBody] = None

    async def read_request(self) -> None:
        chunks: List[bytes] = []
        while True:
            message = await self.down_receive()
            self.replay.append(message)  # the app gets the very same messages, in order
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        self.body = b"".join(chunks)

    async def receive(self) -> Message:
        if self.replay:
            return self.replay.popleft()
        message = await self.down_receive()
        if message["type"] == "http.disconnect" and self.stream is not None:
            self.stream.abandon()  # the client is gone: the sidecar forgets the stream now
        return message

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            headers = list(message.get("headers", ()))
            framing, encoded = _framing(headers)
            if framing is not None and encoded:
                log.warning("%s: the event stream is content-encoded; passing it through unrepaired (add "
                            "AguiStateMiddleware inside the compression middleware)", self.scope.get("path"))
            elif framing is not None:
                state, note = _baseline(self.body, self.scope)
                if note is not None:
                    log.warning("%s: %s; the repair starts from {}", self.scope.get("path"), note)
                self.stream = await FixedBody.open(self.mw.sidecar, self.down_send, self.scope.get("path", ""),
                                                   framing, state, self.mw.policy)
                # Repairing changes the body's length; the server then sends it chunked.
                message = {**message, "headers": [(n, v) for n, v in headers if n.lower() != b"content-length"]}
        elif kind == "http.response.body" and self.stream is not None:
            await self.stream.body(message.get("body", b""), message.get("more_body", False))
            return
        await self.down_send(message)

    def finish(self) -> None:
        if self.stream is not None:
            self.stream.abandon()  # a no-op once the stream has ended

