"""Resume in agui_state.asgi.AguiStateMiddleware (protocol/README.md §16) as plain ASGI, with the
real sidecar ($AGUI_STATE_BIN) keeping the runs: ids on every SSE event, the run filed under the request's
thread, path and credentials, a rejoin (Last-Event-ID) and a reload (POST <path>/connect) answered from the
run log without calling the app, a client that leaves detached and its app cancelled once the grace passed.
The real web server and the real browser client are test/middleware/python-resume.test.ts's part."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from helpers import BIN, DIE_AFTER_ONE, PY, WIRE, child_env
from test_asgi import ID_LINE, OPENING, RUN_INPUT, STATE, body_of, fix, request, stream_app

from agui_state import AguiState, AsyncAguiState, ResumeUnknownError, UnknownReadError
from agui_state.asgi import AguiStateMiddleware

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from sloppy_agent import agent_events, ndjson, sse  # noqa: E402

Message = Dict[str, Any]
ALICE = [(b"authorization", b"Bearer alice"), (b"cookie", b"s=1")]
BODY = json.dumps(RUN_INPUT).encode()
EVENTS = [sse(e) for e in agent_events(RUN_INPUT)]


def scope(path: str = "/agent", headers: Optional[List[Tuple[bytes, bytes]]] = None) -> Dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "path": path,
            "raw_path": path.encode(), "query_string": b"",
            "headers": [(b"content-type", b"application/json"), *(headers or [])]}


async def serve(app: Any, path: str = "/agent", headers: Optional[List[Tuple[bytes, bytes]]] = None,
                body: bytes = BODY, leave: Optional[asyncio.Event] = None) -> List[Message]:
    """The server's side, as in test_asgi, with the request's headers; `leave` set: the client disconnects."""
    inbox, sent = request(body), []
    gone = leave or asyncio.Event()

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope(path, headers), receive, send)
    return sent


def ids_of(sent: List[Message]) -> List[str]:
    return re.findall(r"^id: (\S+)$", b"".join(m.get("body", b"") for m in sent[1:]).decode(), re.M)


class Counting:
    """An app that counts its calls: a rejoin must never reach it."""

    def __init__(self, app: Any) -> None:
        self.app, self.calls = app, 0

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        await self.app(scope, receive, send)


async def test_every_sse_event_gets_an_id_and_the_rest_is_fix_s_text() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(stream_app(EVENTS), own=["/toolState"], join_keys=True, sidecar=s)
        sent = await serve(mw)
        raw = b"".join(m.get("body", b"") for m in sent[1:])
        # §16: the opening block first, on its own, right behind the head: the run's id number 0 alone.
        assert OPENING.fullmatch(sent[1]["body"]), sent[1]
        raw = raw[len(sent[1]["body"]):]
        blocks = [b for b in raw.split(b"\n\n") if b]
        assert blocks and all(ID_LINE.match(b + b"\n") for b in blocks), raw
        assert len(set(ids_of(sent))) == len(blocks) + 1  # and the opening's
        assert body_of(sent) == fix(b"".join(EVENTS), STATE)
        # resume=False, and NDJSON (which has no field for an id): no ids, as before resume.
        off = AguiStateMiddleware(stream_app(EVENTS), own=["/toolState"], join_keys=True, sidecar=s, resume=False)
        assert ids_of(await serve(off)) == []
        nd = AguiStateMiddleware(stream_app([ndjson(e) for e in agent_events(RUN_INPUT)], b"application/x-ndjson"),
                                 own=["/toolState"], join_keys=True, sidecar=s)
        assert b"id:" not in b"".join(m.get("body", b"") for m in (await serve(nd))[1:])


async def test_a_rejoin_gets_exactly_the_events_after_its_id_from_the_log_and_the_app_is_not_called() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        app = Counting(stream_app(EVENTS))
        mw = AguiStateMiddleware(app, own=["/toolState"], join_keys=True, sidecar=s)
        first = await serve(mw, headers=ALICE)
        whole = b"".join(m.get("body", b"") for m in first[1:])
        ids = ids_of(first)
        assert app.calls == 1 and len(ids) >= 3

        again = await serve(mw, headers=[*ALICE, (b"last-event-id", ids[1].encode())])
        assert again[0]["status"] == 200
        assert dict(again[0]["headers"])[b"content-type"] == b"text/event-stream"
        rest = b"".join(m.get("body", b"") for m in again[1:])
        assert rest == whole[whole.index(f"id: {ids[2]}\n".encode()):], "exactly the events after the id"
        assert again[-1]["more_body"] is False, "a finished run ends the response"
        assert app.calls == 1

        # Other credentials, another thread, no credentials, an unknown id: one answer, 410.
        refusals = [
            await serve(mw, headers=[(b"authorization", b"Bearer mallory"), (b"cookie", b"s=1"),
                                     (b"last-event-id", ids[1].encode())]),
            await serve(mw, headers=[(b"last-event-id", ids[1].encode())]),
            await serve(mw, headers=[*ALICE, (b"last-event-id", ids[1].encode())],
                        body=json.dumps({**RUN_INPUT, "threadId": "t2"}).encode()),
            await serve(mw, headers=[*ALICE, (b"last-event-id", b"nonsense")]),
        ]
        assert [r[0]["status"] for r in refusals] == [410] * 4
        assert len({r[1]["body"] for r in refusals}) == 1
        assert json.loads(refusals[0][1]["body"])["error"]["code"] == "resume_unknown"
        assert app.calls == 1


async def test_a_reload_replays_the_thread_s_latest_run_and_a_thread_without_one_is_204() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        app = Counting(stream_app(EVENTS))
        mw = AguiStateMiddleware(app, own=["/toolState"], join_keys=True, sidecar=s, paths=["/agent"])
        await serve(mw, headers=ALICE)
        reload = await serve(mw, path="/agent/connect", headers=ALICE)
        text = b"".join(m.get("body", b"") for m in reload[1:]).decode()
        types = re.findall(r'"type": ?"([A-Z_]+)"', text)
        assert types[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"], types
        assert types[-1] == "RUN_FINISHED"
        none = await serve(mw, path="/agent/connect", headers=ALICE,
                           body=json.dumps({**RUN_INPUT, "threadId": "nobody"}).encode())
        assert none[0]["status"] == 204 and none[1]["body"] == b""
        # A path the middleware does not handle is the app's: /other/connect reaches it.
        assert app.calls == 1
        await serve(mw, path="/other/connect", headers=ALICE)
        assert app.calls == 2


async def test_a_client_that_leaves_is_detached_the_app_goes_on_and_a_rejoin_gets_the_rest_live() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        go_on, leave, cancelled = asyncio.Event(), asyncio.Event(), []

        async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            try:
                for i, event in enumerate(EVENTS):
                    if i == 3:
                        leave.set()
                        await go_on.wait()
                    await send({"type": "http.response.body", "body": event, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        mw = AguiStateMiddleware(app, own=["/toolState"], join_keys=True, sidecar=s)
        first = asyncio.ensure_future(serve(mw, headers=ALICE, leave=leave))
        await asyncio.wait_for(leave.wait(), 60)  # a hang guard; the stream is open: the app sent three events
        # The client left at the third event; the run goes on. Its rejoin reads the log, then the live tail.
        reload = asyncio.ensure_future(serve(mw, path="/agent/connect", headers=ALICE))
        go_on.set()
        await asyncio.wait_for(first, 60)  # (a hang guard) the app's run ends normally: not cancelled
        assert cancelled == []
        text = b"".join(m.get("body", b"") for m in (await asyncio.wait_for(reload, 60))[1:]).decode()
        assert re.findall(r'"type": ?"([A-Z_]+)"', text)[-1] == "RUN_FINISHED"
        assert (await s.stats())["streams"] == 0


async def test_nobody_rejoins_within_the_grace_the_app_is_cancelled_and_its_run_breaks_off(
        caplog: pytest.LogCaptureFixture) -> None:
    async with AsyncAguiState(BIN, ["--detach-grace", "0.05"], env=child_env(), timeout=30) as s:
        leave, cancelled = asyncio.Event(), asyncio.Event()

        async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            for event in EVENTS[:3]:
                await send({"type": "http.response.body", "body": event, "more_body": True})
            leave.set()
            try:
                await asyncio.Event().wait()  # a silent app: only the cancel ends it
            except asyncio.CancelledError:
                cancelled.set()
                raise

        mw = AguiStateMiddleware(app, own=["/toolState"], sidecar=s)
        # It returns (a hang guard of 60 s): the middleware's cancel is no error.
        sent = await asyncio.wait_for(serve(mw, headers=ALICE, leave=leave), 60)
        assert cancelled.is_set()
        assert not any(m["type"] == "http.response.body" and not m.get("more_body", False) for m in sent), \
            "the response is not ended as whole"
        assert (await s.stats())["streams"] == 0
        # A reload of the cancelled run is broken off after what the log holds, never ended as whole: the
        # answer is left without its end, with one line on the middleware's logger and no exception (which
        # the server would log with a traceback).
        with caplog.at_level(logging.INFO, logger="agui_state.asgi"):
            reload = await asyncio.wait_for(serve(mw, path="/agent/connect", headers=ALICE), 60)
        assert reload[0]["status"] == 200 and reload[1]["more_body"] is True
        assert all(m.get("more_body") for m in reload[1:]), "the answer is not ended as whole"
        assert [(r.levelname, r.getMessage()) for r in caplog.records] == \
            [("WARNING", "/agent/connect: the rejoin's answer ended early: the run ended cancelled")]


async def test_fail_open_a_rejoin_the_sidecar_cannot_serve_is_410_and_a_stream_completes() -> None:
    s = await AsyncAguiState(BIN, env=child_env(), timeout=30).start()
    try:
        app = Counting(stream_app(EVENTS))
        mw = AguiStateMiddleware(app, own=["/toolState"], join_keys=True, sidecar=s)
        ids = ids_of(await serve(mw, headers=ALICE))
        s._live().proc.kill()  # the sidecar dies, and its memory log with it
        await s._live().proc.wait()
        gone = await serve(mw, headers=[*ALICE, (b"last-event-id", ids[0].encode())])
        assert gone[0]["status"] == 410 and app.calls == 1
    finally:
        await s.close()


# A stand-in sidecar that tells every request a rejoin (a reload at .../connect), then dies on the next call:
# what the real one cannot be made to do on demand, a rejoinStream that cannot be served even after a restart.
DIES_ON_REJOIN = WIRE + ("import os\n"
                         "for r in iter(read, None):\n"
                         "    if r['method'] != 'classifyRequest':\n"
                         "        os._exit(3)\n"
                         "    kind = 'reload' if r['params']['path'].endswith('/connect') else 'rejoin'\n"
                         "    write(reply(r, {'kind': kind, 'handled': True}))\n")


async def test_fail_open_a_sidecar_that_cannot_be_reached_410_or_204_empty_and_unclassified_goes_to_the_app(
        caplog: pytest.LogCaptureFixture) -> None:
    """§16: rejoinStream failing even after the restart answers 410 (204 for a reload) with an empty body and
    one line; classifyRequest failing sends the request to the app."""
    async with AsyncAguiState(PY, ["-c", DIES_ON_REJOIN], timeout=30) as s:
        app = Counting(stream_app(EVENTS))
        mw = AguiStateMiddleware(app, sidecar=s)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            gone = await serve(mw, headers=[*ALICE, (b"last-event-id", b"x")])
            reload = await serve(mw, path="/agent/connect", headers=ALICE)
        assert [(m["status"], m["headers"]) for m in (gone[0], reload[0])] == [(410, []), (204, [])]
        assert gone[1]["body"] == reload[1]["body"] == b"" and app.calls == 0
        lines = [r.getMessage() for r in caplog.records if "could not be served" in r.getMessage()]
        assert len(lines) == 2 and lines[0].startswith("/agent: the rejoin could not be served (SidecarExitedError"), lines
        assert lines[1].startswith("/agent/connect: the reload could not be served") and lines[1].endswith("answered 204")
    async with AsyncAguiState(*DIE_AFTER_ONE, timeout=30) as s:
        app = Counting(stream_app(EVENTS))
        sent = await serve(AguiStateMiddleware(app, sidecar=s), headers=[*ALICE, (b"last-event-id", b"x")])
        assert app.calls == 1 and sent[0]["status"] == 200 and sent[-1]["more_body"] is False


async def test_client_wrappers_classify_and_raise_the_resume_errors() -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        heads = [("Authorization", "Bearer alice"), ("Last-Event-ID", "nonsense")]
        assert (await s.classify_request("POST", "/agent", heads))["kind"] == "rejoin"
        assert (await s.classify_request("POST", "/agent/connect?x=1", []))["kind"] == "reload"
        assert (await s.classify_request("GET", "/agent", heads))["kind"] == "forward"
        request = {"method": "POST", "path": "/agent", "headers": [list(h) for h in heads], "body": BODY.decode()}
        with pytest.raises(ResumeUnknownError) as e:
            await s.rejoin_stream(request)
        assert (e.value.status, e.value.headers) == (410, {"content-type": "application/json"})
        assert json.loads(e.value.body)["error"]["code"] == "resume_unknown"
        with pytest.raises(ResumeUnknownError) as e:
            await s.rejoin_stream({**request, "path": "/agent/connect", "headers": []})
        assert (e.value.status, e.value.headers, e.value.body) == (204, {}, "")
        with pytest.raises(ResumeUnknownError) as e:  # the earlier form, by the same rules
            await s.rejoin_stream(thread_id="t1", path="/agent", last_event_id="nonsense")
        assert e.value.status == 410
        with pytest.raises(UnknownReadError):
            await s.read_rejoin("r99", wait_ms=0)
        opened = await s.open_stream(framing="sse", resume={
            "threadId": "t1", "path": "/agent", "requestHeaders": [["Authorization", "Bearer alice"]],
            "responseHeaders": [["Content-Type", "text/event-stream"], ["Access-Control-Allow-Origin", "*"]]})
        assert isinstance(opened.get("run"), str)
        assert opened["headers"] == {"ag-ui-resumable": "true", "access-control-expose-headers": "ag-ui-resumable"}
        assert (await s.detach_stream(opened["streamId"]))["graceMs"] > 0
        assert (await s.close_stream(opened["streamId"], broken=True))["text"] == ""


async def test_client_wrappers_take_the_request_form_of_the_edge() -> None:
    # protocol/README.md §14: the middleware's paths and resume go to classifyRequest, the raw request and
    # response head to openStream, and the sidecar answers with what to do.
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        resumed = await s.classify_request("POST", "/agent/run?x=1", [("Last-Event-ID", "x")], paths=("/agent",))
        assert resumed["kind"] == "rejoin" and resumed["handled"] is True and resumed["bodyBytes"] > 0
        assert (await s.classify_request("POST", "/agents", [], paths=["/agent"])) == {"kind": "forward", "handled": False}
        off = await s.classify_request("POST", "/agent", [("Last-Event-ID", "x")], resume=False)
        assert off["kind"] == "forward" and off["handled"] is True
        with pytest.raises(TypeError, match="paths"):
            await s.classify_request("POST", "/agent", [], paths="/agent")  # type: ignore[arg-type]
        request = {"method": "POST", "path": "/agent", "headers": [["Content-Type", "application/json"]],
                   "body": BODY.decode()}
        head = {"status": 200, "headers": [["Content-Type", "text/event-stream"], ["Content-Length", "9"]]}
        opened = await s.open_stream(request=request, response=head, own=["/toolState"])
        assert opened["headers"] == [["Content-Type", "text/event-stream"], ["ag-ui-resumable", "true"]]
        assert opened["replayBytes"] > 0 and "baseline" not in opened and opened["opening"].startswith("id: ")
        fixed = await s.fix_stream(opened["streamId"], EVENTS[0].decode() + EVENTS[1].decode()[:9])
        assert (fixed["pending"], fixed["head"]) == (9, len(EVENTS[0]))
        await s.close_stream(opened["streamId"])
        plain = await s.open_stream(request=request, response=head, resume=False)
        assert "run" not in plain and plain["headers"] == [["Content-Type", "text/event-stream"]]
        await s.close_stream(plain["streamId"])
        passed = await s.open_stream(request=request, response={"status": 200, "headers": [["content-type", "application/json"]]})
        assert passed["pass"]["code"] == "NOT_AN_EVENT_STREAM" and "streamId" not in passed


def test_the_sync_client_classifies_and_refuses_alike() -> None:
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        assert s.classify_request("POST", "/agent", [("Last-Event-ID", "x")])["kind"] == "rejoin"
        assert s.classify_request("POST", "/agent", [("Last-Event-ID", "")])["kind"] == "forward"
        with pytest.raises(ResumeUnknownError) as e:
            s.rejoin_stream({"method": "POST", "path": "/a/connect", "headers": [], "body": BODY.decode()})
        assert (e.value.status, e.value.headers, e.value.body) == (204, {}, "")


def test_store_and_grace_are_the_started_sidecar_s_flags() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    mw = AguiStateMiddleware(app, store="redis://127.0.0.1:6379/0", detach_grace=2.5)
    assert mw.sidecar.args == ("--store", "redis://127.0.0.1:6379/0", "--detach-grace", "2.500")
    assert AguiStateMiddleware(app, detach_grace=2.5).sidecar is not mw.sidecar
    assert AguiStateMiddleware(app, store="redis://127.0.0.1:6379/0", detach_grace=2.5).sidecar is mw.sidecar
    with pytest.raises(ValueError, match="detach_grace"):
        AguiStateMiddleware(app, detach_grace=-1)
    for options in ({"store": "memory"}, {"detach_grace": 0}, {"store": "none", "detach_grace": 1.5}):
        with pytest.raises(ValueError, match="CONFLICTING_OPTIONS"):
            AguiStateMiddleware(app, sidecar=AsyncAguiState(BIN), **options)  # type: ignore[arg-type]


async def test_a_rejoin_whose_client_is_gone_when_it_writes_ends_with_one_line_and_no_exception(
        caplog: pytest.LogCaptureFixture) -> None:
    """A server that raises from send once the client left (uvicorn's ClientDisconnected, an OSError): the
    rejoin ends there, said in one INFO line, and nothing goes up to the server."""
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(stream_app(EVENTS), own=["/toolState"], join_keys=True, sidecar=s)
        ids = ids_of(await serve(mw, headers=ALICE))
        inbox = request(BODY)

        async def receive() -> Message:
            if inbox:
                return inbox.pop(0)
            await asyncio.Event().wait()  # the server never says: the send fails first
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.body":
                raise OSError("the client is gone")

        with caplog.at_level(logging.INFO, logger="agui_state.asgi"):
            await asyncio.wait_for(mw(scope("/agent", [*ALICE, (b"last-event-id", ids[1].encode())]), receive, send), 60)
        assert [(r.levelname, r.getMessage()) for r in caplog.records] == \
            [("INFO", "/agent: the rejoin's answer ended early: the client left (OSError)")]
