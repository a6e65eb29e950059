"""An AG-UI agent that makes the field's three state mistakes (issue 24 §6), as frameworks do when they
write the events themselves: it sends a STATE_SNAPSHOT after every write (which wipes the keys the client
keeps for itself), a key with a `/` in it unescaped (ag-ui #2242), and `add /todos/-` before `/todos`
exists. Standard library only: the middleware's tests and the FastAPI server both use it.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List


def agent_events(run_input: Dict[str, Any]) -> List[Dict[str, Any]]:
    """One run's events: what such a server sends for RunAgentInput `run_input`."""
    thread_id, run_id = run_input.get("threadId", "t"), run_input.get("runId", "r")
    tools: Dict[str, Any] = {"raster-ops/zoom": 3}
    message = f"layer ready: été … 🌍 {run_id}"  # characters of two, three and four UTF-8 bytes
    return [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "STATE_SNAPSHOT", "snapshot": {"toolState": dict(tools)}},
        # The key is "raster-ops/dataset": sent as two segments, as the ADK integration did.
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/toolState/raster-ops/dataset", "value": "era5"}]},
        {"type": "STATE_SNAPSHOT", "snapshot": {"toolState": {**tools, "raster-ops/dataset": "era5"}}},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/todos/-", "value": f"check {run_id}"}]},
        {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": message},
        {"type": "TEXT_MESSAGE_END", "messageId": f"m-{run_id}"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"toolState": {**tools, "raster-ops/dataset": "era5", "run": run_id},
                                                "todos": [f"check {run_id}"]}},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id},
    ]


def sse(event: Dict[str, Any]) -> bytes:
    """One event as Server-Sent Events, UTF-8 (not ASCII-escaped, so that characters span bytes)."""
    return b"data: " + json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n\n"


def ndjson(event: Dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False).encode("utf-8") + b"\n"
