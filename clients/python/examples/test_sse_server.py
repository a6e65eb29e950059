"""The README's Starlette server (examples/sse_server.py), served in-process by httpx's ASGI transport on
this test's event loop, with the real sidecar ($AGUI_STATE_BIN). Needs Debian's python3-starlette and
python3-httpx besides pytest:

    AGUI_STATE_BIN=dist/agui-state /usr/bin/python3 -m pytest -q clients/python/examples
"""
from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any, Dict, List

import httpx
import jsonpatch
import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # the example, and the package from this source tree
import sse_server  # noqa: E402

from agui_state import SidecarExitedError  # noqa: E402


def test_the_readme_shows_this_very_file() -> None:
    readme = (HERE.parent / "README.md").read_text()
    block = re.search(r"<!-- example: sse_server.py -->\n```python\n(.*?)```", readme, re.S)
    assert block, "README.md has no block marked <!-- example: sse_server.py -->"
    assert block.group(1) == (HERE / "sse_server.py").read_text()


def parse_sse(body: str) -> List[Dict[str, Any]]:
    assert body.endswith("\n\n")
    return [json.loads(chunk[len("data: "):]) for chunk in body[:-2].split("\n\n")]


async def post_run(client: httpx.AsyncClient, run_input: Dict[str, Any]) -> List[Dict[str, Any]]:
    r = await client.post("/run", json=run_input)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    return parse_sse(r.text)


def replay(state: Dict[str, Any], events: List[Dict[str, Any]]) -> Dict[str, Any]:
    for ev in events:
        if ev["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, ev["delta"])
    return state


async def test_concurrent_runs_stream_events_that_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    app = sse_server.app
    n = 8
    inside, all_inside = 0, asyncio.Event()
    tool = sse_server.raster_tool

    async def tool_that_waits_for_every_run(dataset: str) -> Dict[str, Any]:
        # Each run reaches its tool after an awaited open_run; all n must be in their tools at once,
        # which they can only be if the server handles them concurrently on its one event loop.
        nonlocal inside
        inside += 1
        if inside == n:
            all_inside.set()
        await asyncio.wait_for(all_inside.wait(), 30)
        result: Dict[str, Any] = await tool(dataset)
        return result

    monkeypatch.setattr(sse_server, "raster_tool", tool_that_waits_for_every_run)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://agent") as client:
        sidecar = app.state.sidecar
        inputs = [{"threadId": f"sse-{i}", "runId": "r1", "state": {"ui": i}, "forwardedProps": {"dataset": f"d{i}"}}
                  for i in range(n)]
        streams = await asyncio.gather(*(post_run(client, x) for x in inputs))
        assert inside == n
        held = []
        for i, events in enumerate(streams):
            assert [e["type"] for e in events] == ["RUN_STARTED", "STATE_DELTA", "STATE_DELTA", "RUN_FINISHED"]
            state = replay({"ui": i}, events)
            assert state == {"ui": i, "toolState": {"raster-ops/dataset": f"d{i}", "raster-ops/bounds": [0, 0, 10, 10]}}
            assert state == (await sidecar.get_state(f"sse-{i}"))["state"]
            held.append(state)
        # A second run on a thread: the client sends what it holds, and the stored map comes back whole.
        stored = sse_server.tool_maps["sse-0"]
        events = await post_run(client, {"threadId": "sse-0", "runId": "r2", "state": held[0],
                                         "forwardedProps": {"dataset": "gfs"}})
        assert events[1] == {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState", "value": stored}]}
        assert events[2] == {"type": "STATE_DELTA",
                             "delta": [{"op": "add", "path": "/toolState/raster-ops~1dataset", "value": "gfs"}]}
        assert replay(held[0], events) == (await sidecar.get_state("sse-0"))["state"]
    with pytest.raises(SidecarExitedError, match="after close"):
        await sidecar.stats()  # the lifespan closed it with the server
