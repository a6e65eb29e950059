"""An AG-UI endpoint that streams Server-Sent Events, one sidecar shared by every request.

    pip install agui_state-*.whl starlette uvicorn
    uvicorn sse_server:app
"""
import asyncio
import json
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from agui_state import AsyncAguiState

tool_maps = {}  # threadId -> the thread's tool map: your own store (a database) in a real server


@asynccontextmanager
async def lifespan(app):
    async with AsyncAguiState() as sidecar:  # started with the server, closed with it
        app.state.sidecar = sidecar
        yield


async def raster_tool(dataset):
    await asyncio.sleep(0.25)  # the tool's own work, awaited: the loop serves other requests meanwhile
    return {"raster-ops/dataset": dataset, "raster-ops/bounds": [0, 0, 10, 10]}


async def run(request: Request):
    run_input = await request.json()  # RunAgentInput: threadId, runId, state, forwardedProps, ...
    sidecar = request.app.state.sidecar
    thread_id, run_id = run_input["threadId"], run_input["runId"]

    async def events():
        yield {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}
        r = await sidecar.open_run(thread_id, run_id=run_id, state=run_input.get("state") or {},
                                   tool_state=tool_maps.get(thread_id, {}))
        for event in r["events"]:
            yield event
        written = await raster_tool(run_input.get("forwardedProps", {}).get("dataset", "era5"))
        r = await sidecar.diff_tool_state(thread_id, set=written)
        tool_maps[thread_id] = (await sidecar.get_state(thread_id, "/toolState"))["state"]
        for event in r["events"]:
            yield event
        yield {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}

    async def sse():
        async for event in events():
            yield f"data: {json.dumps(event)}\n\n"

    return StreamingResponse(sse(), media_type="text/event-stream")


app = Starlette(routes=[Route("/run", run, methods=["POST"])], lifespan=lifespan)
