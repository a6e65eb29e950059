"""ASGI middleware: the repair `agui-state fix` does (protocol/README.md §13), inside the server, through the
sidecar's stream methods (§14), for servers whose events a framework writes (issue 24):

    app.add_middleware(AguiStateMiddleware, own=["/toolState"])     # FastAPI or Starlette

It is plain ASGI 3 and imports no framework. The sidecar starts with the app (ASGI lifespan), or on the first
stream where the server sends no lifespan events, and is started again when it dies, the streams it was
repairing resumed on the new one. It fails open: whatever happens to the sidecar, the response reaches the
client, unrepaired from the point where it cannot be repaired, with a warning on the `agui_state.asgi`
logger; the findings of each stream are said there at INFO.

Resume (protocol/README.md §16, on by default): every SSE event gets an `id:`, and the sidecar logs the run.
A client that drops mid-run leaves the app running for the grace period; a request the sidecar classifies as a
rejoin or a reload is answered from the log without calling the app (_rejoin.py). The sidecar decides every
rule of resume; the middleware passes it the raw request and response heads and writes what comes back. With
store="redis://..." every worker's sidecar serves every worker's runs.
"""
from __future__ import annotations

import asyncio
import collections
import re
from typing import Any, Awaitable, Callable, Deque, Dict, Iterable, List, MutableMapping, Optional, Tuple

from ._async import AsyncAguiState
from ._body import BodyTap, baseline
from ._fixing import FixedBody, RunCancelled
from ._lifespan import Lifespan
from ._rejoin import classify, header_pairs, rejoin
from ._sidecar import SharedSidecar, log, shared
from ._tasks import Tasks

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

    `resume` (default True; protocol/README.md §16): SSE events get ids and the run is logged by the sidecar;
    a client that leaves mid-run is detached (the app goes on for the grace period, and is cancelled if
    nobody rejoins); every handled request is classified by the sidecar (classifyRequest), and a rejoin
    (a POST with Last-Event-ID) or a reload (a POST to <path>/connect) is answered from the log and never
    reaches the app. False: none of this, as before resume. `store` ("memory", "none" or
    "redis://HOST:PORT[/DB]") and `detach_grace` (seconds; 0 cancels the app as soon as its client
    leaves) are the sidecar's --store and --detach-grace, for the sidecar the middleware starts (not one
    given as `sidecar`); None leaves the sidecar's default (memory, 30 s).
    """

    def __init__(self, app: ASGIApp, *, own: Iterable[str] = (), snapshots: Optional[str] = None,
                 join_keys: bool = False, sidecar: Optional[AsyncAguiState] = None,
                 paths: Optional[Iterable[str]] = None, resume: bool = True, store: Optional[str] = None,
                 detach_grace: Optional[float] = None) -> None:
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
        args: List[str] = []
        if store is not None:
            if not isinstance(store, str) or not store:
                raise TypeError(f"AguiStateMiddleware: store must be 'memory', 'none' or 'redis://...', not {store!r}")
            args += ["--store", store]
        if detach_grace is not None:
            if isinstance(detach_grace, bool) or not isinstance(detach_grace, (int, float)) or not 0 <= detach_grace < 1e9:
                raise ValueError(f"AguiStateMiddleware: detach_grace must be a number of seconds >= 0, not {detach_grace!r}")
            args += ["--detach-grace", f"{detach_grace:.3f}"]
        if args and sidecar is not None:
            raise ValueError("AguiStateMiddleware: store and detach_grace are flags of the sidecar the middleware "
                             "starts; start the given sidecar with them instead")
        self.resume = bool(resume)
        self.sidecar = shared(args) if sidecar is None else SharedSidecar(sidecar)

    def _handles(self, path: str) -> bool:
        if self.paths is None:
            return True
        return any(path == p or path.startswith(p if p.endswith("/") else p + "/") for p in self.paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await Lifespan(self.app, self.sidecar, receive, send).run(scope)
        elif scope["type"] != "http" or not self._handles(scope.get("path", "")):
            await self.app(scope, receive, send)
        elif self.resume and (kind := await classify(self.sidecar, scope)) != "forward":
            await rejoin(self.sidecar, scope, receive, send, kind)  # never the app
        else:
            exchange = _Exchange(self, scope, receive, send)
            try:
                if self.resume:
                    await exchange.run_detachable()
                else:
                    await self.app(scope, exchange.receive, exchange.send)
            finally:
                await exchange.close()


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


def _resume(run_input: Dict[str, Any], scope: Scope, headers: List[Tuple[bytes, bytes]]) -> Dict[str, Any]:
    """openStream's `resume` for this request and response (protocol/README.md §16): the raw heads, and the
    RunAgentInput's threadId and messages where it has them (the sidecar decides what a run without a
    threadId may be: rejoined by id, never reloaded)."""
    resume: Dict[str, Any] = {"path": scope.get("path", ""), "requestHeaders": header_pairs(scope.get("headers", ())),
                              "responseHeaders": header_pairs(headers)}
    if isinstance(run_input.get("threadId"), str):
        resume["threadId"] = run_input["threadId"]
    if isinstance(run_input.get("messages"), list):
        resume["messages"] = run_input["messages"]  # what a reload replays after RUN_STARTED
    return resume


def _with(headers: List[Tuple[bytes, bytes]], added: Dict[str, str]) -> List[Tuple[bytes, bytes]]:
    """The response head's headers with openStream's `headers` in place of any of the same name (the sidecar
    gives each whole: access-control-expose-headers with the app's names and the announcement's)."""
    names = {k.lower().encode("latin-1") for k in added}
    return [(n, v) for n, v in headers if n.lower() not in names] + \
        [(k.encode("latin-1"), v.encode("latin-1")) for k, v in added.items()]


class _Exchange:
    """One request and its response: the body handed on as it arrives, a copy kept for its state (BodyTap),
    and the response's event stream, if it is one, repaired on its way out."""

    def __init__(self, mw: AguiStateMiddleware, scope: Scope, receive: Receive, send: Send) -> None:
        self.mw, self.scope, self.down_receive, self.down_send = mw, scope, receive, send
        self.replay: Deque[Message] = collections.deque()  # body messages read for the baseline, the app's next
        self.tap = BodyTap()
        self.pulling = asyncio.Lock()  # one read of the body from the server at a time: the app's or the baseline's
        self.stream: Optional[FixedBody] = None
        self.tasks = Tasks()  # every task started for this exchange, cancelled and awaited by close()
        self.next: Optional["asyncio.Future[Message]"] = None  # the one read past the request (http.disconnect)
        self.app_task: Optional["asyncio.Future[None]"] = None
        self.cancelled = False  # the run was cancelled: nobody rejoined within the grace

    async def _pull(self) -> None:
        """The body's next message from the server, into `replay` (the app gets each in order) and the tap."""
        async with self.pulling:
            if not self.tap.ended.is_set():
                message = await self.down_receive()
                self.tap.take(message)
                self.replay.append(message)

    async def _rest(self) -> None:
        """The body up to BASELINE_LIMIT, for the baseline of a response that starts before the app read it
        all: what is read here waits in `replay` for the app, so no more than the limit is held."""
        while not self.tap.ended.is_set() and not self.tap.too_large:
            await self._pull()

    async def run_detachable(self) -> None:
        """The app, in a task of its own, which the run's cancel (FixedBody, once the grace passed with nobody
        reading) cancels: the app may be silent then, and a write that fails would never come."""
        task = self.app_task = self.tasks.start(self.mw.app(self.scope, self.receive, self.send))
        await asyncio.wait({task})  # cancelled (the server cancelled this request): close() cancels the app
        if self.cancelled and (task.cancelled() or isinstance(task.exception(), RunCancelled)):
            return  # our cancel: the client is gone, and the response with it
        if self.stream is not None and not task.cancelled() and task.exception() is not None:
            await self.stream.settle()  # the app raised: what it wrote goes out before the run breaks off
        task.result()  # the app's own outcome, error or cancel, goes up as it would without the middleware

    def _cancel_app(self) -> None:
        self.cancelled = True
        if self.app_task is not None:
            self.app_task.cancel()

    def _downstream(self) -> "asyncio.Future[Message]":
        """The server's next message past the request body: for HTTP only http.disconnect comes, so the app
        and the middleware's watch share this one read."""
        if self.next is None or (self.next.done() and not self.next.cancelled() and self.next.exception() is None
                                 and self.next.result()["type"] != "http.disconnect"):
            self.next = self.tasks.start(self.down_receive())
        return self.next

    async def receive(self) -> Message:
        while not self.replay and not self.tap.ended.is_set():
            await self._pull()
        if self.replay:
            return self.replay.popleft()
        message = await asyncio.shield(self._downstream())
        if message["type"] == "http.disconnect" and self.stream is not None:
            # The client is gone. A resumable run goes on (detached): the app learns of the disconnect only
            # once the run ends or is cancelled (Starlette cancels a response whose receive says so).
            if self.stream.client_left():
                await self.stream.released.wait()
        return message

    async def _watch(self) -> None:
        """Sees the client leave while the app does not read (an app that only writes), so that the run is
        detached rather than written into the void. It reads past the body only: the app reads the body."""
        await self.tap.ended.wait()
        message = await asyncio.shield(self._downstream())
        if message["type"] == "http.disconnect" and self.stream is not None:
            self.stream.client_left()

    async def send(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            headers = list(message.get("headers", ()))
            framing, encoded = _framing(headers)
            if framing is not None and encoded:
                log.warning("%s: the event stream is content-encoded; passing it through unrepaired (add "
                            "AguiStateMiddleware inside the compression middleware)", self.scope.get("path"))
            elif framing is not None:
                await self._rest()
                run_input, note = await self.tap.run_input(self.scope.get("headers", ()))
                state, bad = baseline(run_input)
                note = note or bad
                if note is not None:
                    log.warning("%s: %s; the repair starts from {}", self.scope.get("path"), note)
                resume = _resume(run_input, self.scope, headers) if self.mw.resume and framing == "sse" else None
                self.stream = await FixedBody.open(self.mw.sidecar, self.down_send, self.scope.get("path", ""),
                                                   framing, state, self.mw.policy, self.tasks, resume,
                                                   self._cancel_app)
                if self.stream.run is not None:
                    self.tasks.start(self._watch())
                # Repairing changes the body's length; the server then sends it chunked.
                headers = _with([(n, v) for n, v in headers if n.lower() != b"content-length"], self.stream.headers)
                message = {**message, "headers": headers}
        elif kind == "http.response.body" and self.stream is not None:
            await self.stream.body(message.get("body", b""), message.get("more_body", False))
            return
        await self.down_send(message)
        if kind == "http.response.start" and self.stream is not None:
            await self.stream.send_opening()  # §16: the opening id block, before the app's first event

    async def close(self) -> None:
        if self.stream is not None:
            self.stream.abandon()  # a no-op once the stream has ended
        await self.tasks.close()

