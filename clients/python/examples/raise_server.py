"""A FastAPI app that writes N events and then raises, as an agent whose node fails mid-run does, behind
AguiStateMiddleware under uvicorn. test/middleware/python-raise.test.ts reads it with the real HttpAgent:
everything the app wrote before it raised must reach the client, repaired, in order, and the response then end
as uvicorn ends it.

    AGUI_STATE_BIN=dist/agui-state /usr/bin/python3 clients/python/examples/raise_server.py

POST /repair?n=N&size=S answers through AguiStateMiddleware(lifecycle="repair"), /pass?... through one with
lifecycle="pass" (both on one sidecar), /direct?... without a middleware. The events are RUN_STARTED (the
request's threadId and runId), then in turn a STATE_SNAPSHOT {step, pad}, a STATE_DELTA of /step, and a text
message's start, content and end, where pad and the content are S characters, each its own write; with
&finished=1 the last of the N is a RUN_FINISHED. Then the app raises. GET /stats is the sidecar's stats (its
open `streams`). It listens on an ephemeral port of 127.0.0.1 and prints `listening on PORT` once it serves.
"""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Dict, List

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # the package from this source tree
from agui_state import AsyncAguiState  # noqa: E402
from agui_state.asgi import AguiStateMiddleware  # noqa: E402


class NodeFailed(RuntimeError):
    """The app's failure after its last event."""


def events(thread_id: str, run_id: str, n: int, size: int, finished: bool) -> List[Dict[str, Any]]:
    """The run the app writes: n events, pad and content of size characters each."""
    pad = "p" * size
    out: List[Dict[str, Any]] = [{"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}]
    for i in range(1, n):
        out.append([
            {"type": "STATE_SNAPSHOT", "snapshot": {"step": i, "pad": pad}},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/step", "value": i}]},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m{i}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i - 1}", "delta": pad},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m{i - 2}"},
        ][(i - 1) % 5])
    if finished and n > 1:
        out[n - 1] = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}
    return out


sidecar = AsyncAguiState()
app = FastAPI()
app.add_middleware(AguiStateMiddleware, paths=["/repair"], lifecycle="repair", sidecar=sidecar)
app.add_middleware(AguiStateMiddleware, paths=["/pass"], lifecycle="pass", sidecar=sidecar)


@app.post("/{route}")
async def run(route: str, request: Request, n: int, size: int, finished: int = 0) -> StreamingResponse:
    body = await request.json()
    run_events = events(body["threadId"], body["runId"], n, size, finished == 1)

    async def stream() -> AsyncIterator[bytes]:
        for event in run_events:
            yield f"data: {json.dumps(event)}\n\n".encode("utf-8")
        raise NodeFailed(f"the node failed after {n} events")

    return StreamingResponse(stream(), media_type="text/event-stream")


@app.get("/stats")
async def stats() -> JSONResponse:
    return JSONResponse(await sidecar.stats())


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    print(f"listening on {sock.getsockname()[1]}", flush=True)
    await serving


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(main())
