"""agui_state.asgi's `lifecycle` option and closeStream's `ended` (issue 40, protocol/README.md §13, §14) as
plain ASGI, on the real sidecar ($AGUI_STATE_BIN): with lifecycle="repair", an app that raises inside its run
gets its run ended by the sidecar (the closes and a RUN_ERROR with code INCOMPLETE_STREAM), its response ended
cleanly, and its error said once at WARNING instead of raised to the server; by default (the sidecar's: pass)
and with lifecycle="pass" it breaks off as before.
The table of real frameworks' faults through uvicorn into the real HttpAgent is
test/middleware/python-lifecycle.test.ts's part."""
from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Optional

import pytest
from helpers import BIN, child_env
from test_asgi import request, serve

from agui_state import AsyncAguiState
from agui_state.asgi import AguiStateMiddleware

RUN_INPUT = {"threadId": "t1", "runId": "r1", "state": {"todos": []}, "messages": [], "tools": [],
             "context": [], "forwardedProps": {}}
EVENTS: List[Dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Let me"},
]


class NodeFailed(RuntimeError):
    pass


async def raising_app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    """Sends the events, each its own write, then raises inside the run (a node that failed)."""
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    for event in EVENTS:
        await send({"type": "http.response.body", "body": f"data: {json.dumps(event)}\n\n".encode(), "more_body": True})
    raise NodeFailed("the node failed")


def events_of(sent: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()
    return [json.loads(line[6:]) for block in body.split("\n\n") for line in block.split("\n") if line.startswith("data: ")]


async def through(lifecycle: Optional[str], resume: bool) -> List[Dict[str, Any]]:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        options = {} if lifecycle is None else {"lifecycle": lifecycle}
        mw = AguiStateMiddleware(raising_app, sidecar=s, resume=resume, **options)
        return await serve(mw, request(json.dumps(RUN_INPUT).encode()))


async def test_an_app_that_raises_inside_its_run_gets_a_whole_failed_run(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="agui_state.asgi")
    for resume in (True, False):
        caplog.clear()
        sent = await through("repair", resume)  # no NodeFailed: the client got a whole run
        assert sent[-1] == {"type": "http.response.body", "body": sent[-1]["body"], "more_body": False}
        events = events_of(sent)
        assert events[:3] == EVENTS
        assert [e["type"] for e in events[3:]] == ["TEXT_MESSAGE_END", "RUN_ERROR"]
        assert events[-1]["code"] == "INCOMPLETE_STREAM"
        said = [r for r in caplog.records if r.name == "agui_state.asgi"]
        assert [(r.levelno, r.getMessage(), r.exc_info) for r in said] == [
            (logging.WARNING, "/agent: the app raised mid-stream (NodeFailed: the node failed); the run was "
                              "ended with a RUN_ERROR (INCOMPLETE_STREAM)", None)], resume


async def test_by_default_or_with_lifecycle_pass_an_app_that_raises_breaks_off_as_before() -> None:
    for lifecycle in (None, "pass"):  # left out: the sidecar's default, pass
        for resume in (True, False):
            with pytest.raises(NodeFailed):
                await through(lifecycle, resume)


async def test_an_invalid_lifecycle_is_a_construction_error() -> None:
    for bad in ("fix", "", True, 1):
        with pytest.raises(ValueError, match="INVALID_OPTION"):
            AguiStateMiddleware(raising_app, lifecycle=bad)  # type: ignore[arg-type]
