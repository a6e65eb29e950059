"""Recorded answers of a real framework (test/fixtures/frameworks/<framework>/*.json), replayed behind
AguiStateMiddleware under uvicorn. test/frameworks/langgraph-python.test.ts runs it:

    AGUI_STATE_BIN=dist/agui-state /usr/bin/python3 clients/python/examples/replay_server.py \\
        --fixtures test/fixtures/frameworks/langgraph

Each fixture is a thread: its `path`, its `own` (the members the framework writes) and its runs, each the
request and every byte of the answer. A POST to a fixture's path goes through an AguiStateMiddleware of its own
(own=the fixture's `own`, paths=[its path]; one sidecar for all, the process's) to the replay app, which answers
the run whose request.runId is the request's runId (404 for any other): the recorded status and content type,
then the recorded body, one write per SSE event, as the framework's server flushed them. It listens on an
ephemeral port of 127.0.0.1 and prints `listening on PORT` once it serves; the middleware's log (a repair it
could not make, a failure it failed open on) goes to stderr at WARNING.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import uvicorn

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # the package from this source tree
from agui_state.asgi import AguiStateMiddleware  # noqa: E402

FIXTURES = [json.loads(p.read_text("utf-8")) for p in
            sorted(Path(sys.argv[sys.argv.index("--fixtures") + 1]).glob("*.json"))]
RUNS: Dict[Tuple[str, str], Dict[str, Any]] = {(f["path"], r["request"]["runId"]): r for f in FIXTURES for r in f["runs"]}


async def replay(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    """The framework's server, as recorded: plain ASGI, so that nothing but the middleware touches the bytes."""
    if scope["type"] == "lifespan":
        while (message := await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while (message := await receive())["type"] == "http.request":
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    run = RUNS.get((scope["path"], json.loads(body or b"{}").get("runId")))
    if run is None:
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"no recorded run"})
        return
    await send({"type": "http.response.start", "status": run["status"],
                "headers": [(b"content-type", run["contentType"].encode()), (b"cache-control", b"no-cache")]})
    for write in re.split(r"(?<=\n\n)", run["body"]):
        if write:
            await send({"type": "http.response.body", "body": write.encode("utf-8"), "more_body": True})
            await asyncio.sleep(0)  # each event its own write
    await send({"type": "http.response.body", "body": b""})


ROUTES = {f["path"]: AguiStateMiddleware(replay, own=f["own"], paths=[f["path"]]) for f in FIXTURES}


async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    """Each fixture's path to its own middleware; the lifespan (the shared sidecar's start) through the first."""
    route = next(iter(ROUTES.values())) if scope["type"] == "lifespan" else ROUTES.get(scope.get("path", ""), replay)
    await route(scope, receive, send)


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
