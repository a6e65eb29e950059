"""B25's Python server (bench/big-state.ts): a Starlette app under uvicorn on an ephemeral port of 127.0.0.1
(it prints `listening on PORT` once uvicorn has finished its startup) that answers every POST with the run in
the file given (bench/big-state-run.ts: SSE, ~6 STATE_SNAPSHOTs of a ~1 MB state), each event yielded on its
own as a framework writes it, after reading the whole request body as a framework does.

- /plain: the app as it is.
- /own: through AguiStateMiddleware(own=[...]), the server's members (LangGraph's recipe).
- /none: through AguiStateMiddleware() with no own.

    python3 bench/big_state_server.py RUN_FILE /table /status ...
"""
from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, MutableMapping

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients/python"))

import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from agui_state.asgi import AguiStateMiddleware  # noqa: E402

EVENTS = [block.encode("utf-8") + b"\n\n" for block in Path(sys.argv[1]).read_text("utf-8").split("\n\n") if block]
OWN = sys.argv[2:]


async def run(request: Request) -> StreamingResponse:
    await request.body()

    async def events() -> AsyncIterator[bytes]:
        for event in EVENTS:
            yield event

    return StreamingResponse(events(), media_type="text/event-stream")


plain = Starlette(routes=[Route("/{via}", run, methods=["POST"])])
owned = AguiStateMiddleware(plain, own=OWN)
unowned = AguiStateMiddleware(plain)

Scope = MutableMapping[str, Any]


async def app(scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]) -> None:
    """By the path's first segment; the lifespan goes to the middleware (both share the process's sidecar)."""
    path = scope.get("path", "")
    inner = owned if scope["type"] == "lifespan" or path.startswith("/own") else unowned if path.startswith("/none") \
        else plain
    await inner(scope, receive, send)


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
