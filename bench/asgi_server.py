"""B13's server (bench/asgi.ts): one Starlette app that streams small STATE_DELTA events, served at /plain as
it is and at /mw through AguiStateMiddleware(own=["/toolState"]), under uvicorn on an ephemeral port of
127.0.0.1 (it prints `listening on PORT`). Debian's python3-starlette and python3-uvicorn.

- POST /{plain,mw}/burst?n=N: N events, each yielded (and so sent) on its own, as fast as the app can.
- POST /{plain,mw}/paced?n=N&ms=M: N events, one every M ms, each carrying the wall-clock microsecond at
  which the app yielded it, for the latency the middleware adds.

It prints its line once uvicorn has finished its startup, and with it the app's lifespan, where the
middleware starts its sidecar; `--lifespan off` leaves that to the first stream (B22py's note).
"""
from __future__ import annotations

import asyncio
import socket
import sys
import time
from pathlib import Path
from typing import AsyncIterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients/python"))

import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from agui_state.asgi import AguiStateMiddleware  # noqa: E402

START = b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
OPEN = b'data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState","value":{}}]}\n\n'
END = b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n'


async def burst(request: Request) -> StreamingResponse:
    n = int(request.query_params["n"])

    async def events() -> AsyncIterator[bytes]:
        yield START
        yield OPEN
        for i in range(n):
            yield b'data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState/k%d","value":%d}]}\n\n' % (
                i % 10, i)
        yield END

    return StreamingResponse(events(), media_type="text/event-stream")


async def paced(request: Request) -> StreamingResponse:
    n, every = int(request.query_params["n"]), float(request.query_params["ms"]) / 1000

    async def events() -> AsyncIterator[bytes]:
        yield START
        yield OPEN
        for _ in range(n):
            await asyncio.sleep(every)
            yield b'data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState/at","value":%d}]}\n\n' % (
                time.time_ns() // 1000)
        yield END

    return StreamingResponse(events(), media_type="text/event-stream")


app = AguiStateMiddleware(Starlette(routes=[Route("/{via}/burst", burst, methods=["POST"]),
                                            Route("/{via}/paced", paced, methods=["POST"])]),
                          own=["/toolState"], paths=["/mw"])


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    lifespan = sys.argv[sys.argv.index("--lifespan") + 1] if "--lifespan" in sys.argv else "on"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan, access_log=False))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
