"""A FastAPI server whose events a framework writes (here sloppy_agent.py, with the field's three state
mistakes), repaired by one line: AguiStateMiddleware. The same agent is also served at /raw, outside the
middleware's `paths`, as the control. test/middleware/python.test.ts runs it under uvicorn:

    AGUI_STATE_BIN=dist/agui-state /usr/bin/python3 clients/python/examples/middleware_server.py

It listens on an ephemeral port of 127.0.0.1 and prints `listening on PORT` once it serves: the app has
started, and with it the middleware's sidecar (ASGI lifespan; `--lifespan off` leaves it to the first
stream). A run whose forwardedProps hold {"gate": N} stops after N events until POST /release: the test
kills the sidecar there. `--app-without-lifespan` serves the same routes as an app that knows only HTTP
(it raises on a lifespan scope, as many hand-written ASGI apps do), wrapped as `AguiStateMiddleware(app,
...)`: the middleware answers the lifespan itself.

Resume (test/middleware/python-resume.test.ts): `--store URL`, `--detach-grace SECONDS` and `--no-resume` are
the middleware's store, detach_grace and resume=False (`--lifecycle MODE` its lifecycle); `--log-bytes SIZE` gives the middleware a sidecar
started with that run log cap (--log-bytes: past it the least recently used run is evicted); `--verbose` logs
the middleware's INFO lines too. With ?pause=NAME a run stops after its fourth event
until POST /resume?name=NAME; GET /paused?name=NAME answers once it stopped there, GET /cancelled?name=NAME
once it was cancelled there. GET /hits counts the runs that reached the app at /agent, GET /requests the
requests that reached the server at /agent and below (the middleware's answers too). With ?raise=N a run
raises after its Nth event (an app that failed mid-run).
"""
from __future__ import annotations

import asyncio
import logging
import socket
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the agent, and the package from this source tree
from sloppy_agent import agent_events, sse  # noqa: E402

from agui_state import AsyncAguiState  # noqa: E402
from agui_state.asgi import AguiStateMiddleware  # noqa: E402

WITHOUT_LIFESPAN = "--app-without-lifespan" in sys.argv


def flag(name: str) -> Optional[str]:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


GRACE = flag("--detach-grace")
OPTIONS: Dict[str, Any] = {"own": ["/toolState"], "join_keys": True, "paths": ["/agent"],
                           "resume": "--no-resume" not in sys.argv, "store": flag("--store"),
                           "detach_grace": None if GRACE is None else float(GRACE)}
if flag("--lifecycle") is not None:  # issue 40: "pass" leaves a raising app's response broken off
    OPTIONS["lifecycle"] = flag("--lifecycle")
if flag("--log-bytes") is not None:  # a sidecar of the caller's own: the middleware starts it
    OPTIONS["sidecar"] = AsyncAguiState(args=["--log-bytes", str(flag("--log-bytes"))])
app = FastAPI()
if not WITHOUT_LIFESPAN:
    app.add_middleware(AguiStateMiddleware, **OPTIONS)
gates: Dict[str, asyncio.Event] = {}
PAUSE_AFTER = 4  # events
pauses: Dict[str, Dict[str, asyncio.Event]] = {}
hits = 0
requests = 0


def pause(name: str) -> Dict[str, asyncio.Event]:
    return pauses.setdefault(name, {"paused": asyncio.Event(), "resume": asyncio.Event(),
                                    "cancelled": asyncio.Event()})


async def run(request: Request) -> StreamingResponse:
    global hits
    if request.url.path == "/agent":
        hits += 1
    run_input = await request.json()
    gate = run_input.get("forwardedProps", {}).get("gate")
    name = request.query_params.get("pause")
    fail = request.query_params.get("raise")

    async def events() -> AsyncIterator[bytes]:
        for i, event in enumerate(agent_events(run_input)):
            if fail is not None and i == int(fail):
                raise RuntimeError("the agent failed mid-run")
            if i == gate:
                await gates.setdefault(run_input["runId"], asyncio.Event()).wait()
            if i == PAUSE_AFTER and name:
                p = pause(name)
                p["paused"].set()
                try:
                    await p["resume"].wait()
                except asyncio.CancelledError:
                    p["cancelled"].set()
                    raise
            yield sse(event)

    return StreamingResponse(events(), media_type="text/event-stream")


app.post("/agent")(run)
app.post("/raw")(run)


@app.get("/hits")
async def count() -> int:
    return hits


@app.get("/requests")
async def requests_seen() -> int:
    return requests


@app.get("/paused")
async def paused(name: str) -> str:
    await pause(name)["paused"].wait()
    return "paused"


@app.post("/resume")
async def go_on(name: str) -> str:
    pause(name)["resume"].set()
    return "resumed"


@app.get("/cancelled")
async def cancelled(name: str) -> str:
    await pause(name)["cancelled"].wait()
    return "cancelled"


@app.post("/release/{run_id}")
async def release(run_id: str) -> Dict[str, bool]:
    gates.setdefault(run_id, asyncio.Event()).set()
    return {"released": True}


async def http_only(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
    if scope["type"] != "http":
        raise RuntimeError(f"this app serves HTTP only, not {scope['type']}")
    await app(scope, receive, send)


def counted(inner: Callable[..., Any]) -> Callable[..., Any]:
    """The server's app: `inner`, with each request at /agent and below counted, whoever answers it."""
    async def count(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        global requests
        if scope["type"] == "http" and scope["path"].startswith("/agent"):
            requests += 1
        await inner(scope, receive, send)
    return count


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    lifespan = sys.argv[sys.argv.index("--lifespan") + 1] if "--lifespan" in sys.argv else "on"
    served = AguiStateMiddleware(http_only, **OPTIONS) \
        if WITHOUT_LIFESPAN else app
    server = uvicorn.Server(uvicorn.Config(counted(served), log_level="warning", lifespan=lifespan))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    await serving


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if "--verbose" in sys.argv:
        logging.getLogger("agui_state.asgi").setLevel(logging.INFO)
    asyncio.run(main())
