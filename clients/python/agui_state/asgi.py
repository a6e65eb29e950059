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
store="redis://..." every worker's sidecar serves every worker's runs; with one sidecar for the host
(`sidecar="unix:PATH"` or AGUI_STATE_SIDECAR, protocol/README.md §2), every worker's runs are in it, and a
rejoin reaches the run whichever worker it lands on, with the memory store.

The middleware decides nothing about a request itself (protocol/README.md §14): the sidecar says whether it is
handled (`paths`), what it is (classifyRequest), how much of its body to keep, whether its response is an event
stream, its baseline, and the response's headers (openStream). Its states are _lifecycle.py's.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, List, MutableMapping, Optional, Union

from ._address import resolve, unstarted
from ._async import AsyncAguiState
from ._exchange import Exchange
from ._lifespan import Lifespan
from ._rejoin import classify, rejoin
from ._sidecar import SharedSidecar, shared

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class AguiStateMiddleware:
    """Repairs every AG-UI event stream the app answers with (SSE or NDJSON, as the sidecar tells them
    apart), as `agui-state fix` with the same options would: `own` (escaped pointers such as "/toolState":
    the server owns those members, the client everything else), `snapshots` ("pass" or "delta") and
    `join_keys`. The baseline is the request's RunAgentInput.state.

    `sidecar`: an AsyncAguiState to use (started here if it is not); by default one process serves every
    middleware of the Python process, started at the app's lifespan startup (or, without one, on the
    first stream) and closed at its shutdown. Or the address of the host's shared sidecar, `"unix:PATH"` or
    `"tcp:127.0.0.1:PORT"` (else AGUI_STATE_SIDECAR; protocol/README.md §2, "One sidecar per host"): the
    Python process connects to it at those moments instead, and connects again when the connection breaks,
    the streams resumed as on a new sidecar. With `sidecar_start` (else AGUI_STATE_SIDECAR_START=1), a worker
    that finds nobody there starts it (`agui-state serve --listen ADDRESS --exit-idle 60000`, detached, with
    `store` and `detach_grace` as its flags; without it they are a ValueError: they are the shared sidecar's
    to set). A bad address is a ValueError here. `paths`: only requests whose path is one of these, or lies
    below one, are handled (the sidecar's rule, protocol/README.md §16); by default all are. Every other
    response passes untouched. Put it inside any compression middleware (added before it), so that it sees
    plain text.

    `resume` (default True; protocol/README.md §16): SSE events get ids and the run is logged by the sidecar;
    a client that leaves mid-run is detached (the app goes on for the grace period, and is cancelled if
    nobody rejoins); a rejoin (a POST with Last-Event-ID) or a reload (a POST to <path>/connect) is answered
    from the log and never reaches the app. False: none of this. `store` ("memory", "none" or
    "redis://HOST:PORT[/DB]") and `detach_grace` (seconds; 0 cancels the app as soon as its client
    leaves) are the sidecar's --store and --detach-grace, for the sidecar the middleware starts: given
    with an address and no start mode, or with an AsyncAguiState, they are a ValueError (CONFLICTING_OPTIONS); None leaves the sidecar's default (memory, 30 s).

    `lifecycle` ("repair" or "pass"; None leaves the sidecar's default, pass; protocol/README.md §13) is `fix
    --lifecycle`: with "repair", a run's lifecycle faults are mended so that the client does not fail it, and
    a stream that stops inside its run (the app's response ended early, or the app raised mid-stream) is ended
    by the sidecar with a RUN_ERROR (INCOMPLETE_STREAM) and its response ended cleanly: the client gets a
    whole, failed run, and the app's exception is logged once at WARNING rather than raised to the server.
    """

    def __init__(self, app: ASGIApp, *, own: Iterable[str] = (), snapshots: Optional[str] = None,
                 join_keys: bool = False, sidecar: Union[AsyncAguiState, str, None] = None,
                 paths: Optional[Iterable[str]] = None, resume: bool = True, store: Optional[str] = None,
                 detach_grace: Optional[float] = None, lifecycle: Optional[str] = None,
                 sidecar_start: Optional[bool] = None) -> None:
        self.app = app
        owned = [] if isinstance(own, (str, bytes)) else list(own)
        if isinstance(own, (str, bytes)) or not all(isinstance(p, str) and p.startswith("/") for p in owned):
            raise TypeError(f"AguiStateMiddleware: own must be a sequence of JSON Pointers such as "
                            f"'/toolState', not {own!r}")
        if snapshots not in (None, "pass", "delta"):
            raise ValueError(f"AguiStateMiddleware: snapshots must be 'pass' or 'delta', not {snapshots!r}")
        if lifecycle not in (None, "repair", "pass"):
            raise ValueError(f"AguiStateMiddleware: INVALID_OPTION: lifecycle must be 'repair' or 'pass', not {lifecycle!r}")
        listed = None if paths is None or isinstance(paths, (str, bytes)) else list(paths)
        if paths is not None and (listed is None or not all(isinstance(p, str) for p in listed)):
            raise TypeError(f"AguiStateMiddleware: paths must be a sequence of str, not {paths!r}")
        self.paths = listed  # as given: the sidecar holds the rule, and refuses an entry not starting with /
        self.resume = bool(resume)
        self.options = {"own": owned or None, "snapshots": snapshots, "join_keys": bool(join_keys),
                        "resume": None if self.resume else False, "lifecycle": lifecycle}
        args: List[str] = []
        if store is not None:
            if not isinstance(store, str) or not store:
                raise TypeError(f"AguiStateMiddleware: store must be 'memory', 'none' or 'redis://...', not {store!r}")
            args += ["--store", store]
        if detach_grace is not None:
            if isinstance(detach_grace, bool) or not isinstance(detach_grace, (int, float)) or not 0 <= detach_grace < 1e9:
                raise ValueError(f"AguiStateMiddleware: detach_grace must be a number of seconds >= 0, not {detach_grace!r}")
            args += ["--detach-grace", f"{detach_grace:.3f}"]
        if isinstance(sidecar, AsyncAguiState):  # the caller's: the environment's address does not apply
            if args:
                raise ValueError("AguiStateMiddleware: CONFLICTING_OPTIONS: store and detach_grace are flags of the "
                                 "sidecar the middleware starts; start the given sidecar with them instead")
            if sidecar_start:
                raise ValueError("AguiStateMiddleware: CONFLICTING_OPTIONS: sidecar_start starts the shared sidecar "
                                 "at an address; the given sidecar is an AsyncAguiState (start it with sidecar_start)")
            self.sidecar = SharedSidecar(sidecar)
            return
        if sidecar is not None and not isinstance(sidecar, str):
            raise TypeError(f"AguiStateMiddleware: sidecar must be an AsyncAguiState or an address such as "
                            f"'unix:/run/agui-state/sidecar.sock', not {sidecar!r}")
        host = resolve(sidecar, sidecar_start, "AguiStateMiddleware")
        if args and host is not None and not host.start:  # the sidecar there keeps the flags it was started with
            given = [name for name, value in (("store", store), ("detach_grace", detach_grace)) if value is not None]
            raise unstarted("AguiStateMiddleware", given, host.address)
        self.sidecar = shared(args, host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await Lifespan(self.app, self.sidecar, receive, send).run(scope)
            return
        got = await classify(self.sidecar, scope, self.paths, self.resume) if scope["type"] == "http" else None
        if got is None or not got.get("handled"):
            await self.app(scope, receive, send)  # not ours (or the sidecar cannot say): untouched
        elif got["kind"] != "forward":  # never the app
            await rejoin(self.sidecar, scope, receive, send, got["kind"], int(got.get("bodyBytes") or 0))
        else:
            await Exchange(self.app, self.sidecar, self.options, int(got.get("bodyBytes") or 0),
                           scope, receive, send).run()
