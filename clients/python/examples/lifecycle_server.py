"""A FastAPI server that sends the lifecycle faults real frameworks send (issue 40), behind AguiStateMiddleware.
test/middleware/python-lifecycle.test.ts runs it under uvicorn with the shared table of those streams:

    AGUI_STATE_BIN=dist/agui-state /usr/bin/python3 clients/python/examples/lifecycle_server.py \\
        --cases test/fixtures/lifecycle/cases.json [--lifecycle pass]

POST /agent/N answers the case whose input.threadId is the request's threadId (N names the case in the log
lines, the middleware's findings among them with `--debug`): its events as SSE, then the end
the case says: "eof" ends the response, "reset" raises in the app after the last event (a node that fails
mid-run; without lifecycle repair, uvicorn breaks the response off). `--lifecycle` is the middleware's option
(left out: the middleware does not set it, and the sidecar's default, pass, holds). It listens on an
ephemeral port of 127.0.0.1 and prints `listening on PORT` once it serves.
"""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from pathlib import Path
from typing import Any, AsyncIterator, Dict, Optional

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # the package from this source tree
from agui_state.asgi import AguiStateMiddleware  # noqa: E402


def flag(name: str) -> Optional[str]:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


class NodeFailed(RuntimeError):
    """The app's failure after the last event of a "reset" case."""


CASES: Dict[str, Dict[str, Any]] = {c["input"]["threadId"]: c for c in
                                    json.loads(Path(flag("--cases") or "").read_text("utf-8"))["cases"]}
LIFECYCLE = flag("--lifecycle")
app = FastAPI()
app.add_middleware(AguiStateMiddleware, paths=["/agent"], **({} if LIFECYCLE is None else {"lifecycle": LIFECYCLE}))


@app.post("/agent/{n}")
async def run(request: Request) -> StreamingResponse:
    case = CASES[(await request.json())["threadId"]]

    async def events() -> AsyncIterator[bytes]:
        for event in case["events"]:
            yield f"data: {json.dumps(event)}\n\n".encode("utf-8")
            await asyncio.sleep(0)  # each event its own write, as a framework's stream sends them
        if case["end"] == "reset":
            raise NodeFailed(f"the node failed mid-run ({case['issue']})")

    return StreamingResponse(events(), media_type="text/event-stream")


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
    if "--debug" in sys.argv:  # each finding of the sidecar's, as JSON (_fixing.py)
        logging.getLogger("agui_state.asgi").setLevel(logging.DEBUG)
    asyncio.run(main())
