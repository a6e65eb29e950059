"""AguiStateMiddleware on the host's shared sidecar (protocol/README.md §2, "One sidecar per host"; §14, "A sidecar
that dies mid-stream"): the same restart path as a spawned sidecar's, only the transport differs. A shared
sidecar killed mid-stream is a connection that broke: the middleware connects again (in start mode, starting
it again) and the stream resumes with its replay, byte for byte what `fix` writes; without anyone to connect
to, the rest goes out as it came. A shared sidecar that hangs is not this worker's to end: only its connection
is. The real uvicorn with several workers is test/middleware/python-workers.test.ts's part."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
from typing import Any, List

import pytest
from shared_host import Serve, serving, sock  # noqa: F401 - sock is a fixture
from test_asgi import RUN_INPUT, STATE, body_of, fix, request, serve, stream_app, without_ids

from agui_state.asgi import AguiStateMiddleware

from sloppy_agent import agent_events, sse  # noqa: E402 - on the path test_asgi put it on

Message = Any
BODY = json.dumps(RUN_INPUT).encode()


@pytest.fixture(autouse=True)
def no_sidecar_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGUI_STATE_SIDECAR", raising=False)
    monkeypatch.delenv("AGUI_STATE_SIDECAR_START", raising=False)


def said(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agui_state.asgi" and r.levelno >= logging.WARNING]


class Killer:
    """The app's `between` and the server's `send` of a stream whose shared sidecar is killed (-9) before event
    `at` goes to the app's send, once the client has had every event before it as fix writes them."""

    def __init__(self, events: List[bytes], at: int) -> None:
        self.events, self.at, self.got = events, at, []  # type: ignore[var-annotated]
        self.expected = fix(b"".join(events[:at]), STATE)
        self.forwarded = asyncio.Event()
        self.killed: List[int] = []
        self.mw: Any = None

    async def record(self, message: Message) -> None:
        self.got.append(without_ids(message.get("body", b"")))
        if b"".join(self.got) == self.expected:
            self.forwarded.set()

    async def between(self, i: int) -> None:
        if i == self.at:
            await asyncio.wait_for(self.forwarded.wait(), 60)  # a hang guard: the repair stopped
            self.killed.append(self.mw.sidecar.client.pid)
            os.kill(self.killed[0], signal.SIGKILL)


async def test_kill_9_of_the_shared_sidecar_mid_stream_in_start_mode_it_is_started_again_and_the_rest_repaired(
        sock: str, caplog: pytest.LogCaptureFixture) -> None:
    address = f"unix:{sock}"
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    kill = Killer(events, 3)
    kill.mw = mw = AguiStateMiddleware(stream_app(events, between=kill.between), own=["/toolState"], join_keys=True,
                                       sidecar=address, sidecar_start=True)
    try:
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(BODY), send=kill.record)
        assert body_of(sent) == fix(b"".join(events), STATE), "repaired after the kill as if none had happened"
        pid = mw.sidecar.client.pid  # type: ignore[union-attr]
        assert pid != kill.killed[0] and serving(sock) == [pid], "started again, once"
        assert said(caplog) == [
            f"agui-state sidecar at {address} is gone (the connection to the agui-state sidecar at {address} "
            "closed); connecting again",
            f"agui-state sidecar at {address}: connected again (pid {pid})",
            "/agent: the stream resumes on the new agui-state sidecar, its mirror rebuilt from the "
            f"{len(b''.join(events[:3]))} bytes answered for"]
        mw.app = stream_app(events)
        assert body_of(await serve(mw, request(BODY))) == fix(b"".join(events), STATE)
    finally:
        await mw.sidecar.close()


async def test_without_start_mode_the_rest_goes_out_as_it_came_and_the_next_stream_connects_again(
        sock: str, caplog: pytest.LogCaptureFixture) -> None:
    address = f"unix:{sock}"
    Serve(address)
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    kill = Killer(events, 3)
    kill.mw = mw = AguiStateMiddleware(stream_app(events, between=kill.between), own=["/toolState"], join_keys=True,
                                       sidecar=address)
    try:
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(BODY), send=kill.record)
        assert body_of(sent) == fix(b"".join(events[:3]), STATE) + b"".join(events[3:]), "every event, in order"
        # Refused; or, reached before the dying sidecar's socket closed, a connection closed before it answered.
        why = re.compile(r"\((ConnectionRefusedError: \[Errno 111\] Connection refused|Silent: the connection closed "
                         r"before the sidecar answered)\)\)")
        assert [why.sub("(WHY))", line) for line in said(caplog)] == [
            f"agui-state sidecar at {address} is gone (the connection to the agui-state sidecar at {address} "
            "closed); connecting again",
            f"/agent: agui-state fixStream failed (SidecarUnreachableError: no agui-state sidecar at {address}: nobody "
            "answers there (WHY)); the rest of this response goes through unrepaired"]
        caplog.clear()
        again = Serve(address)  # the process manager's restart
        mw.app = stream_app(events)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            assert body_of(await serve(mw, request(BODY))) == fix(b"".join(events), STATE)
        assert said(caplog) == [f"agui-state sidecar at {address}: connected again (pid {again.pid})"]
    finally:
        await mw.sidecar.close()


async def test_a_stopped_shared_sidecar_loses_this_worker_s_connection_only(
        sock: str, caplog: pytest.LogCaptureFixture) -> None:
    # Issue 39 §5's hang, on a shared sidecar: after the repair call limit the stream goes on unrepaired, as with
    # a sidecar of its own; but the sidecar serves other workers, and is not this one's to end.
    address = f"unix:{sock}"
    shared = Serve(address)
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    repaired = fix(b"".join(events[:3]), STATE)
    got: List[bytes] = []
    had_it = asyncio.Event()

    async def record(message: Message) -> None:
        got.append(without_ids(message.get("body", b"")))
        if b"".join(got) == repaired:
            had_it.set()

    async def between(i: int) -> None:
        if i == 3:
            await asyncio.wait_for(had_it.wait(), 60)
            os.kill(shared.pid, signal.SIGSTOP)

    mw = AguiStateMiddleware(stream_app(events, between=between), own=["/toolState"], join_keys=True, sidecar=address)
    try:
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(BODY), send=record)
        assert body_of(sent) == repaired + b"".join(events[3:])
        assert said(caplog) == [
            f"/agent: the agui-state sidecar at {address} did not answer fixStream within 5000 ms; this process's "
            "connection to it is closed, this response goes on unrepaired from here, and the next stream connects "
            "again"]
        os.kill(shared.pid, signal.SIGCONT)
        assert shared.proc.poll() is None, "still serving"
        caplog.clear()
        mw.app = stream_app(events)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            assert body_of(await serve(mw, request(BODY))) == fix(b"".join(events), STATE)
        assert said(caplog) == [f"agui-state sidecar at {address}: connected again (pid {shared.pid})"]
    finally:
        os.kill(shared.pid, signal.SIGCONT)
        await mw.sidecar.close()


async def test_the_lifespan_connects_at_startup_and_at_shutdown_closes_the_connection_not_the_sidecar(
        sock: str) -> None:
    address = f"unix:{sock}"
    async def http_only(scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http", "an app that takes no part in the lifespan: the middleware answers it"

    mw = AguiStateMiddleware(http_only, sidecar=address, sidecar_start=True)
    inbox: "asyncio.Queue[Message]" = asyncio.Queue()
    heard: List[str] = []

    async def send(message: Message) -> None:
        heard.append(message["type"])

    inbox.put_nowait({"type": "lifespan.startup"})
    lifespan = asyncio.ensure_future(mw({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send))
    await asyncio.wait_for(_until_heard(heard, "lifespan.startup.complete"), 60)
    started = serving(sock)
    assert len(started) == 1, "started by the startup, before any request"
    inbox.put_nowait({"type": "lifespan.shutdown"})
    await asyncio.wait_for(lifespan, 60)
    assert heard == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert serving(sock) == started, "the shared sidecar outlives the worker's shutdown"


async def _until_heard(heard: List[str], what: str) -> None:
    while what not in heard:
        await asyncio.sleep(0.01)


def test_the_workers_of_one_python_process_share_one_connection(sock: str) -> None:
    address = f"unix:{sock}"
    a = AguiStateMiddleware(stream_app([]), sidecar=address)
    assert AguiStateMiddleware(stream_app([]), sidecar=address, own=["/x"]).sidecar is a.sidecar
    assert AguiStateMiddleware(stream_app([]), sidecar=address, sidecar_start=True).sidecar is not a.sidecar
    assert AguiStateMiddleware(stream_app([])).sidecar is not a.sidecar
