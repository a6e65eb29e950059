"""agui_state.asgi.AguiStateMiddleware's hazards (issue 39 §3, §5), as plain ASGI against the real sidecar
($AGUI_STATE_BIN): a sidecar that stops answering mid-stream, a large upload, and the tasks the middleware
starts. The repair's own rules are test_asgi.py's."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any, Awaitable, Dict, List, Optional, Set

import pytest
from test_asgi import RUN_INPUT, STATE, body_of, fix, request, serve, without_ids

from agui_state import AsyncAguiState
from agui_state.asgi import AguiStateMiddleware
from helpers import BIN, child_env

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from sloppy_agent import agent_events, sse  # noqa: E402

Message = Dict[str, Any]
BODY = json.dumps(RUN_INPUT).encode()


def said(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agui_state.asgi" and r.levelno >= logging.WARNING]


def ticking_app(events: List[bytes], between: Any) -> Any:
    """An app that reads the request, then sends one event every 20 ms, `between(i)` before the i-th."""
    async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        for i, event in enumerate(events):
            await between(i)
            await send({"type": "http.response.body", "body": event, "more_body": True})
            await asyncio.sleep(0.02)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    return app


async def test_a_stopped_sidecar_is_ended_after_the_repair_call_limit_and_the_stream_goes_on_unrepaired(
        caplog: pytest.LogCaptureFixture) -> None:
    # Issue 39 §5: the sidecar is stopped (SIGSTOP) mid-stream. Its fixStream goes unanswered; after
    # REPAIR_CALL_LIMIT the middleware ends it, and every event the app wrote reaches the client, in order:
    # the ones before the stop repaired, the rest as the app wrote them. The next stream has a new sidecar.
    sloppy = [sse(e) for e in agent_events(RUN_INPUT)]
    ticks = [sse({"type": "CUSTOM", "name": "tick", "value": i}) for i in range(90)]
    events = sloppy[:-1] + ticks + sloppy[-1:]  # 100 events
    stop_at = len(sloppy) - 1  # once the client has the sloppy part, repaired
    repaired = fix(b"".join(events[:stop_at]), STATE)
    got: List[bytes] = []
    had_it = asyncio.Event()
    stopped: List[int] = []
    mw: AguiStateMiddleware

    async def record(message: Message) -> None:
        got.append(without_ids(message.get("body", b"")))
        if b"".join(got) == repaired:
            had_it.set()

    async def between(i: int) -> None:
        if i == stop_at:
            await asyncio.wait_for(had_it.wait(), 60)  # a hang guard: the repair never wrote what fix writes
            stopped.append(mw.sidecar.client.pid)  # type: ignore[union-attr]
            os.kill(stopped[0], signal.SIGSTOP)

    # Its own sidecar (the grace names another process than the other tests'), with the module's limit.
    mw = AguiStateMiddleware(ticking_app(events, between), own=["/toolState"], join_keys=True, detach_grace=1)
    try:
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(BODY), send=record)
        assert body_of(sent) == repaired + b"".join(events[stop_at:]), "every event, in order"
        assert said(caplog) == [
            f"/agent: the agui-state sidecar did not answer fixStream within 5000 ms; it is ended (pid {stopped[0]}), "
            "this response goes on unrepaired from here, and the next stream starts a new one"]
        caplog.clear()
        # The next request is repaired again, by a new sidecar.
        mw.app = ticking_app(sloppy, lambda i: asyncio.sleep(0))
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            assert body_of(await serve(mw, request(BODY))) == fix(b"".join(sloppy), STATE)
        pid = mw.sidecar.client.pid  # type: ignore[union-attr]
        assert pid != stopped[0] and said(caplog) == [f"agui-state sidecar restarted (pid {pid})"]
        with pytest.raises(ProcessLookupError):
            os.kill(stopped[0], 0)  # ended and reaped
    finally:
        if stopped:
            try:
                os.kill(stopped[0], signal.SIGKILL)  # the test failed before the middleware ended it
            except ProcessLookupError:
                pass
        await mw.sidecar.close()


def kib(field: str) -> int:
    """A figure of this process's memory from /proc/self/status, in KiB."""
    return int(re.search(field + r":\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))  # type: ignore[union-attr]


async def test_a_200_mib_upload_reaches_the_app_as_it_arrives_and_no_more_than_the_limit_is_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    # Issue 39 §5: the app sees the upload's first chunk before the rest has come, and the middleware keeps
    # a copy of no more than classifyRequest's bodyBytes (32 MiB at most): this process (the server) grows far
    # less than 200 MiB. Past the limit the baseline is unknown: openStream gets no body, and the sidecar
    # starts the repair from {} and says why (its `baseline`), as the proxy does.
    chunk, chunks = 1 << 20, 200
    handed = 0
    stream = b"".join(map(sse, agent_events(RUN_INPUT)))

    async def receive() -> Message:
        nonlocal handed
        if handed < chunks:
            handed += 1
            return {"type": "http.request", "body": b"x" * chunk, "more_body": handed < chunks}  # a new object each
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    seen: List[int] = []  # how many chunks the server had handed out when the app got each of its own

    async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        more = True
        while more:
            message = await receive()
            seen.append(handed)
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": stream, "more_body": False})

    sent: List[Message] = []

    async def record(message: Message) -> None:
        sent.append(message)

    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(app, own=["/toolState"], join_keys=True, sidecar=s)
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here: the peak of this request alone
        before = kib("VmRSS")
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            await mw({"type": "http", "method": "POST", "path": "/agent", "headers": []}, receive, record)
        grew = kib("VmHWM") - before
    assert seen[0] == 1 and seen == list(range(1, chunks + 1)), "each chunk reaches the app as it arrives"
    assert grew < 100 << 10, f"grew {grew >> 10} MiB: more than the 32 MiB kept"
    assert body_of(sent) == fix(stream, {})
    warned = said(caplog)
    assert len(warned) == 1 and warned[0].startswith("/agent: ") and "{}" in warned[0], warned


async def test_an_app_that_answers_before_it_reads_the_body_still_has_the_request_state_as_the_baseline() -> None:
    # The response starts before the app read the body: the middleware reads it then (up to the limit), for
    # the baseline, and the app gets every message of it afterwards, in order.
    stream = b"".join(map(sse, agent_events(RUN_INPUT)))
    got: List[Message] = []

    async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        while not got or got[-1].get("more_body"):
            got.append(await receive())
        await send({"type": "http.response.body", "body": stream, "more_body": False})

    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(app, own=["/toolState"], join_keys=True, sidecar=s)
        messages = request(BODY, parts=3)
        sent = await serve(mw, [dict(m) for m in messages])
    assert got == messages
    assert body_of(sent) == fix(stream, STATE)


async def ends_with_no_task_left(handling: Awaitable[Any], kinds: Optional[Set[str]] = None) -> None:
    """Awaits one request's handling, then, before the loop runs anything else, finds no task it started still
    pending (of those whose coroutine is one of `kinds`, where other requests run beside it)."""
    before = asyncio.all_tasks()
    await handling
    left = [t for t in asyncio.all_tasks() - before
            if not t.done() and (kinds is None or t.get_coro().__qualname__ in kinds)]  # type: ignore[union-attr]
    assert left == [], left


def scope(path: str = "/agent", headers: Any = ()) -> Dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "headers": [(b"content-type", b"application/json"),
                                                                          *headers]}


def leaving_client(leave: asyncio.Event, sent: List[Message]) -> Any:
    """The server's receive and send for a client that leaves once `leave` is set."""
    inbox = request(BODY)

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
    return receive, send


async def test_every_task_a_stream_starts_ends_with_its_request() -> None:
    # Issue 39 §3: the app's task, the stream's pump, the watch for the client's leaving, the server's read and
    # the closeStream after a disconnect are all cancelled or finished, and awaited, before the handling returns.
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    async with AsyncAguiState(BIN, env=child_env(), timeout=30, args=["--detach-grace", "0"]) as s:
        mw = AguiStateMiddleware(ticking_app(events, lambda i: asyncio.sleep(0)), sidecar=s)
        sent: List[Message] = []
        await ends_with_no_task_left(mw(scope(), *leaving_client(asyncio.Event(), sent)))
        assert body_of(sent) == fix(b"".join(events), STATE, [])
        # The client leaves at the third event, and with no grace the app is cancelled.
        leave = asyncio.Event()

        async def between(i: int) -> None:
            if i == 3:
                leave.set()
            elif i > 3:
                await asyncio.sleep(60)  # silent: the cancel comes first
        mw = AguiStateMiddleware(ticking_app(events, between), sidecar=s)
        await ends_with_no_task_left(mw(scope(), *leaving_client(leave, [])))
        assert (await s.stats())["streams"] == 0, "the stream was closed before the handling returned"


async def test_a_rejoin_whose_client_leaves_while_the_run_is_silent_leaves_no_read_behind() -> None:
    # The rejoin's read of the run (readRejoin, waiting on a silent run) is cancelled and awaited when its client
    # leaves, and the read closed on the sidecar, before the rejoin's handling returns.
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    alice = [(b"authorization", b"Bearer alice")]
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        go_on, left = asyncio.Event(), asyncio.Event()

        async def between(i: int) -> None:
            if i == 3:
                left.set()
                await go_on.wait()
        mw = AguiStateMiddleware(ticking_app(events, between), sidecar=s)
        first = asyncio.ensure_future(mw(scope("/agent", alice), *leaving_client(left, [])))
        await asyncio.wait_for(left.wait(), 60)  # a hang guard: the run is under way, and silent now
        leave, sent = asyncio.Event(), []
        receive, send = leaving_client(leave, sent)

        async def record(message: Message) -> None:
            await send(message)
            if message.get("body"):
                leave.set()  # the client leaves once it has the run so far
        await ends_with_no_task_left(asyncio.wait_for(mw(scope("/agent/connect", alice), receive, record), 60),
                                     {"AsyncAguiState.call", "_disconnect"})
        assert b"RUN_STARTED" in b"".join(m.get("body", b"") for m in sent)
        go_on.set()
        await asyncio.wait_for(first, 60)


async def test_an_app_that_answers_before_it_reads_a_large_body_gets_it_whole_and_no_more_than_body_bytes_is_read_ahead(
        caplog: pytest.LogCaptureFixture) -> None:
    # protocol/README.md §14: at the response head the middleware reads on, for openStream, only up to
    # classifyRequest's bodyBytes (here 64 KiB); the rest is the app's to read, as it arrives, in order.
    chunk, chunks = 16 << 10, 64  # 1 MiB
    handed = 0
    stream = b"".join(map(sse, agent_events(RUN_INPUT)))

    async def receive() -> Message:
        nonlocal handed
        if handed < chunks:
            handed += 1
            return {"type": "http.request", "body": b"y" * chunk, "more_body": handed < chunks}
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    at_head: List[int] = []
    got: List[bytes] = []

    async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        at_head.append(handed)
        more = True
        while more:
            message = await receive()
            got.append(message["body"])
            more = message.get("more_body", False)
        await send({"type": "http.response.body", "body": stream, "more_body": False})

    sent: List[Message] = []

    async def record(message: Message) -> None:
        sent.append(message)

    async with AsyncAguiState(BIN, ["--max-request-body", "64K"], env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(app, sidecar=s)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            await mw({"type": "http", "method": "POST", "path": "/agent", "headers": []}, receive, record)
    assert at_head == [(64 << 10) // chunk + 1], "read on past 64 KiB by one message, no more"
    assert b"".join(got) == b"y" * chunk * chunks, "the app got the whole body, in order"
    assert body_of(sent) == fix(stream, {}, [])
    assert len(said(caplog)) == 1, "the baseline is unknown: one warning, the sidecar's"
