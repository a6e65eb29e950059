"""The ASGI app test/middleware/python-workers.test.ts serves under `uvicorn --workers 4`: the sloppy agent
(clients/python/examples/sloppy_agent.py) at POST /agent behind AguiStateMiddleware (own /toolState, join keys,
the memory store, resume on), and at POST /raw outside its `paths` (the stream as the agent sends it, the
oracle's input), every answer stamped with the worker's pid (`x-worker-pid`), so the test can tell
which worker served a run and which its rejoin. The middleware takes its sidecar from the environment
(AGUI_STATE_SIDECAR, AGUI_STATE_SIDECAR_START); with neither, each worker spawns its own.

Workers share nothing but files, so what the test steers goes through files:
- forwardedProps {"gate": N, "gateFile": PATH}: the run stops after N events until PATH exists;
- WORKERS_APP_HITS=PATH: each run that reaches the app at /agent appends a line (its runId) to PATH;
- WORKERS_APP_EXIT_IDLE_MS=MS: in start mode, the sidecar a worker starts exits MS after its last connection
  closes (its --exit-idle), so the test can see it go once uvicorn stops.
"""
from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Dict

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "clients/python/examples"), str(ROOT / "clients/python")]
from sloppy_agent import agent_events, sse  # noqa: E402

from agui_state import AsyncAguiState  # noqa: E402
from agui_state.asgi import AguiStateMiddleware  # noqa: E402

# The middleware's lines on stderr beside uvicorn's own, one each (the root logger is left as uvicorn set it).
_said = logging.StreamHandler(sys.stderr)
_said.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
logging.getLogger("agui_state").addHandler(_said)


async def run(request: Request) -> StreamingResponse:
    run_input = await request.json()
    hits = os.environ.get("WORKERS_APP_HITS")
    if hits and request.url.path == "/agent":
        with open(hits, "a") as f:
            f.write(f"{run_input['runId']}\n")
    props = run_input.get("forwardedProps") or {}
    gate, gate_file = props.get("gate"), props.get("gateFile")

    async def events() -> AsyncIterator[bytes]:
        for i, event in enumerate(agent_events(run_input)):
            if i == gate:
                while not os.path.exists(gate_file):
                    await asyncio.sleep(0.01)
            yield sse(event)

    return StreamingResponse(events(), media_type="text/event-stream")


def stamped(inner: Callable[..., Any]) -> Callable[..., Any]:
    """The app with every HTTP answer, the middleware's own (a rejoin's) included, naming the worker."""
    pid = str(os.getpid()).encode()

    async def app(scope: Dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        async def stamp(message: Dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-worker-pid", pid)]}
            await send(message)
        await inner(scope, receive, stamp if scope["type"] == "http" else send)
    return app


def middleware_options() -> Dict[str, Any]:
    options: Dict[str, Any] = {"own": ["/toolState"], "join_keys": True, "paths": ["/agent"]}
    exit_idle = os.environ.get("WORKERS_APP_EXIT_IDLE_MS")
    if exit_idle:  # the shared sidecar through the client, for its --exit-idle (the middleware starts it with 60 s)
        options["sidecar"] = AsyncAguiState(sidecar=os.environ["AGUI_STATE_SIDECAR"], sidecar_start=True,
                                             args=["--exit-idle", exit_idle], timeout=5)
    return options


routes = [Route("/agent", run, methods=["POST"]), Route("/raw", run, methods=["POST"])]
app = stamped(AguiStateMiddleware(Starlette(routes=routes), **middleware_options()))
