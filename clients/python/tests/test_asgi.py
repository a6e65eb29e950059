"""agui_state.asgi.AguiStateMiddleware (issue 24 §2) as plain ASGI, with no framework: small ASGI apps
stand in for the server, this file for the server's side of the connection, and the real sidecar
($AGUI_STATE_BIN) repairs. What the middleware forwards must be byte for byte what `agui-state fix` with
the same flags (and `--state` the request's RunAgentInput.state) writes for the app's stream. The web
server itself (uvicorn, FastAPI, the real @ag-ui/client) is test/middleware/python.test.ts's part."""
from __future__ import annotations

import asyncio
import json
import re
import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple

import jsonpatch
import pytest
from helpers import BIN, child_env

from agui_state import AsyncAguiState, UnknownStreamError
from agui_state.asgi import AguiStateMiddleware

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from sloppy_agent import agent_events, ndjson, sse  # noqa: E402

Message = Dict[str, Any]
STATE = {"selectedLayer": "era5", "ui": {"panel": "layers"}}
RUN_INPUT = {"threadId": "t1", "runId": "r1", "state": STATE, "messages": [], "tools": [], "context": [],
             "forwardedProps": {}}
FLAGS = ["--own", "/toolState", "--join-keys"]


def fix(stream: bytes, state: Dict[str, Any], flags: List[str] = FLAGS, status: int = 0) -> bytes:
    """What `agui-state fix` writes for the whole stream: the oracle. `status` 1: fix left a finding
    unfixed (one it cannot mend)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(state, f)
    try:
        r = subprocess.run([BIN, "fix", "--state", f.name, *flags], input=stream, capture_output=True,
                           env=child_env(), timeout=60)
    finally:
        os.unlink(f.name)
    assert r.returncode == status, r.stderr
    return r.stdout


def replay(state: Dict[str, Any], body: bytes) -> Dict[str, Any]:
    """The state a client holds after the SSE body, each delta applied by python3-jsonpatch (which
    raises where the client would warn)."""
    for block in body.decode("utf-8").split("\n\n"):
        data = "\n".join(line[6:] for line in block.split("\n") if line.startswith("data: "))
        event = json.loads(data) if data else {}
        if event.get("type") == "STATE_SNAPSHOT":
            state = event["snapshot"]
        elif event.get("type") == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
    return state


def request(body: bytes, parts: int = 1, path: str = "/agent") -> List[Message]:
    cut = [len(body) * i // parts for i in range(parts + 1)]
    return [{"type": "http.request", "body": body[a:b], "more_body": i < parts - 1}
            for i, (a, b) in enumerate(zip(cut, cut[1:]))]


def scope(path: str = "/agent") -> Dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "path": path,
            "raw_path": path.encode(), "query_string": b"", "headers": [(b"content-type", b"application/json")]}


def stream_app(chunks: List[bytes], content_type: bytes = b"text/event-stream", seen: Optional[List[Message]] = None,
               extra: Optional[List[Any]] = None,
               between: Optional[Callable[[int], Awaitable[None]]] = None) -> Callable[..., Awaitable[None]]:
    """An app that reads the whole request (keeping each message in `seen`), then sends `chunks`."""
    async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if seen is not None:
                seen.append(message)
            if not message.get("more_body"):
                break
        headers = [(b"content-type", content_type), (b"content-length", str(sum(map(len, chunks))).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers + (extra or [])})
        for i, chunk in enumerate(chunks):
            if between is not None:
                await between(i)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    return app


async def serve(app: Any, messages: List[Message], path: str = "/agent",
                send: Optional[Callable[[Message], Awaitable[None]]] = None) -> List[Message]:
    """The server's side: the request's messages, then nothing until the app is done; what it was sent."""
    inbox, sent = list(messages), []
    never = asyncio.Event()

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await never.wait()
        return {"type": "http.disconnect"}

    async def record(message: Message) -> None:
        sent.append(message)
        if send is not None:
            await send(message)

    await app(scope(path), receive, record)
    return sent


# Our event ids (protocol/README.md §16): `<run>.<seq>.<nonce>`, the first line of each event resume stamps.
ID_LINE = re.compile(rb"(?:^|(?<=\n\n)|(?<=\r\n\r\n)|(?<=\r\r))id: [A-Za-z0-9_-]{12}\.[1-9][0-9]*\.[A-Za-z0-9_-]{11}(?:\r\n|\n|\r)")


# A resumable response's opening block (protocol/README.md §16): the run's id number 0 alone, before any event.
OPENING = re.compile(rb"^id: [A-Za-z0-9_-]+\.0\.[A-Za-z0-9_-]+\n\n")


def without_ids(body: bytes) -> bytes:
    """`body` with our event ids, and the opening block that starts it, taken out."""
    return OPENING.sub(b"", ID_LINE.sub(b"", body), count=1)


def body_of(sent: List[Message]) -> bytes:
    """The response's body with our event ids (and its opening block) taken out: what `fix` writes, held to its
    bytes."""
    assert sent[0]["type"] == "http.response.start" and sent[-1]["more_body"] is False, sent
    return without_ids(b"".join(m.get("body", b"") for m in sent[1:]))


def headers_of(sent: List[Message]) -> Dict[bytes, bytes]:
    return dict(sent[0]["headers"])


async def test_the_app_gets_the_request_as_sent_and_its_state_is_the_baseline() -> None:
    stream = b"".join(map(sse, agent_events(RUN_INPUT)))
    body = json.dumps(RUN_INPUT).encode()
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        seen: List[Message] = []
        mw = AguiStateMiddleware(stream_app([stream], seen=seen), own=["/toolState"], join_keys=True, sidecar=s)
        sent = await serve(mw, request(body, 3))
        assert seen == request(body, 3), "the very messages, in order"
        assert body_of(sent) == fix(stream, STATE)
        # No Content-Length once rewritten; the announcement of a resumable answer (§16) from openStream.
        assert headers_of(sent) == {b"content-type": b"text/event-stream", b"ag-ui-resumable": b"true"}
        state = replay(STATE, body_of(sent))
        assert {k: state[k] for k in STATE} == STATE, "the client's keys stand under own"
        assert state["toolState"] == {"raster-ops/zoom": 3, "raster-ops/dataset": "era5", "run": "r1"}
        assert state["todos"] == ["check r1"]
        # The negative control: the stream as sent wipes the client's keys, and the unescaped key fails.
        first = stream.split(b"\n\n")
        assert "selectedLayer" not in replay(STATE, b"\n\n".join(first[:2]) + b"\n\n")
        with pytest.raises(jsonpatch.JsonPointerException, match="raster-ops"):
            replay(STATE, stream)
        assert (await s.stats())["streams"] == 0, "closed at the end"


async def test_characters_cut_between_chunks_reach_the_sidecar_whole() -> None:
    events = agent_events(RUN_INPUT)
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        for content_type, encode in ((b"text/event-stream", sse), (b"application/x-ndjson", ndjson)):
            stream = b"".join(map(encode, events))
            assert len(stream) > len(stream.decode("utf-8")), "multi-byte characters in the stream"
            one_byte_each = [stream[i:i + 1] for i in range(len(stream))]
            mw = AguiStateMiddleware(stream_app(one_byte_each, content_type), own=["/toolState"], join_keys=True,
                                     sidecar=s)
            sent = await serve(mw, request(json.dumps(RUN_INPUT).encode()))
            assert body_of(sent) == fix(stream, STATE), content_type
            # In three parts, each cut inside a character: still what fix writes.
            cuts = [i for i in range(1, len(stream)) if stream[i] & 0xC0 == 0x80][:3]
            parts = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
            mw = AguiStateMiddleware(stream_app(parts, content_type), own=["/toolState"], join_keys=True, sidecar=s)
            assert body_of(await serve(mw, request(json.dumps(RUN_INPUT).encode()))) == fix(stream, STATE)
            # The last event cut off before its end of line (or blank line): still read, as fix reads it.
            cut_off = stream.rstrip(b"\n")
            mw = AguiStateMiddleware(stream_app([cut_off[:-9], cut_off[-9:]], content_type), own=["/toolState"],
                                     join_keys=True, sidecar=s)
            assert body_of(await serve(mw, request(json.dumps(RUN_INPUT).encode()))) == fix(cut_off, STATE)
        # SSE with CRLF and CR line ends, one byte per chunk: a part never ends between a CR and its LF.
        for ends in (b"\r\n", b"\r"):
            stream = b"".join(map(sse, events)).replace(b"\n", ends)
            mw = AguiStateMiddleware(stream_app([stream[i:i + 1] for i in range(len(stream))]), own=["/toolState"],
                                     join_keys=True, sidecar=s)
            assert body_of(await serve(mw, request(json.dumps(RUN_INPUT).encode()))) == fix(stream, STATE), ends


async def test_other_responses_pass_untouched() -> None:
    stream = b"".join(map(sse, agent_events(RUN_INPUT)))
    body = json.dumps(RUN_INPUT).encode()
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        before = (await s.stats())["requests"]
        cases = [
            ("JSON", "/agent", stream_app([b'{"a": ', b'"\xc3\xa9"}'], b"application/json")),
            ("outside paths", "/other", stream_app([stream], b"text/event-stream")),
            ("gzip", "/agent", stream_app([b"\x1f\x8b not ours to read"], b"text/event-stream",
                                          extra=[(b"content-encoding", b"gzip")])),
        ]
        for name, path, app in cases:
            sent = await serve(AguiStateMiddleware(app, own=["/toolState"], sidecar=s, paths=["/agent"]),
                               request(body, 2, path), path)
            assert sent == await serve(app, request(body, 2, path), path), name
            assert headers_of(sent).get(b"content-length") is not None, name
        # One classifyRequest per request; an openStream at the head of each handled one, which says pass
        # (not an event stream; content-encoded), and this stats call: no stream was opened.
        assert (await s.stats())["requests"] == before + 3 + 2 + 1
        assert (await s.stats())["streams"] == 0
    with pytest.raises(TypeError):
        AguiStateMiddleware(stream_app([]), own="/toolState")
    with pytest.raises(ValueError):
        AguiStateMiddleware(stream_app([]), snapshots="never")


async def test_a_disconnect_or_a_failed_send_closes_the_stream_without_resume() -> None:
    events = agent_events(RUN_INPUT)
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        # A client that goes away: the app, as Starlette's StreamingResponse does, hears http.disconnect.
        first_body = asyncio.Event()

        async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            await send({"type": "http.response.body", "body": sse(events[0]), "more_body": True})
            assert (await receive())["type"] == "http.disconnect"

        inbox = request(json.dumps(RUN_INPUT).encode())

        async def receive() -> Message:
            if inbox:
                return inbox.pop(0)
            await first_body.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message.get("body"):
                first_body.set()

        await AguiStateMiddleware(app, own=["/toolState"], sidecar=s, resume=False)(scope(), receive, send)
        await asyncio.sleep(0)  # a turn of the loop: the closeStream it sent goes before the calls below
        with pytest.raises(UnknownStreamError) as e:
            await s.fix_stream("s1", "")
        assert e.value.data == {"code": "UNKNOWN_STREAM", "streamId": "s1", "reason": "closed"}

        # A send that fails (the connection broke): the client left a stream that is not resumable, so the
        # stream is closed and the app cancelled (protocol/README.md §14); the handling returns.
        async def broken(message: Message) -> None:
            if message.get("body"):
                raise ConnectionResetError("the client's connection broke")

        cancelled: List[bool] = []

        async def writes(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            await receive()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            try:
                for event in events:
                    await send({"type": "http.response.body", "body": sse(event), "more_body": True})
                await asyncio.Event().wait()  # only the cancel ends it
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        mw = AguiStateMiddleware(writes, own=["/toolState"], sidecar=s, resume=False)
        await asyncio.wait_for(serve(mw, request(json.dumps(RUN_INPUT).encode()), send=broken), 60)
        assert cancelled == [True]
        await asyncio.sleep(0)
        with pytest.raises(UnknownStreamError) as e:
            await s.fix_stream("s2", "")
        assert e.value.data is not None and e.value.data["reason"] == "closed"
        assert (await s.stats())["streams"] == 0


def kill_between(s: AsyncAguiState, events: List[bytes], kills: List[int], got: List[bytes],
                 killed: Optional[List[int]] = None
                 ) -> Tuple[Callable[[int], Awaitable[None]], Callable[[Message], Awaitable[None]]]:
    """The app's `between` and the server's `send` of a stream whose sidecar is killed (-9) before each
    event numbered in `kills` goes to the app's send, once the client has had every event before it as
    fix writes them (each such output must differ from the last): so each kill comes between two fixStream
    calls, wherever the loop is. `killed` gets the pids killed."""
    expected = {k: fix(b"".join(events[:k]), STATE) for k in kills}
    assert len(set(expected.values())) == len(kills), "each kill waits for output of its own"
    forwarded = {k: asyncio.Event() for k in kills}

    async def record(message: Message) -> None:
        got.append(without_ids(message.get("body", b"")))  # the sidecar gives whole events: ids whole
        for k, event in forwarded.items():
            if b"".join(got) == expected[k]:
                event.set()

    async def kill(i: int) -> None:
        if i in kills:
            try:  # a hang guard: a middleware that stops repairing never forwards what this waits for
                await asyncio.wait_for(forwarded[i].wait(), 60)
            except asyncio.TimeoutError:
                raise AssertionError(f"the client never had the first {i} events as fix writes them") from None
            if killed is not None:
                killed.append(s.pid)
            os.kill(s.pid, signal.SIGKILL)
    return kill, record


def said(caplog: pytest.LogCaptureFixture) -> List[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agui_state.asgi" and r.levelno >= logging.WARNING]


async def test_kill_9_mid_stream_restarts_the_sidecar_and_the_rest_is_repaired(
        caplog: pytest.LogCaptureFixture) -> None:
    # Issue 32 §6: after the kill, the stream goes on on a new sidecar that was fed what the old one had
    # answered for, so it holds the very mirror: the whole body is what fix writes, byte for byte.
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    body = json.dumps(RUN_INPUT).encode()
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        first_pid = s.pid
        got: List[bytes] = []
        between, record = kill_between(s, events, [3], got)
        mw = AguiStateMiddleware(stream_app(events, between=between), own=["/toolState"], join_keys=True,
                                 sidecar=s)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(body), send=record)
        assert s.pid != first_pid, "a new sidecar"
        assert body_of(sent) == fix(b"".join(events), STATE)
        # One opening block, the first stream's, first: the stream opened again on the new sidecar is a new
        # run, and its opening is not written (the client has an id already).
        raw = b"".join(m.get("body", b"") for m in sent[1:])
        assert OPENING.match(raw) and len(re.findall(rb"^id: \S+\.0\.", raw, re.M)) == 1, raw[:200]
        state = replay(STATE, body_of(sent))
        assert {k: state[k] for k in STATE} == STATE, "the client's keys survive the kill"
        # The negative control: the snapshots after the kill, as sent, wipe them.
        assert "selectedLayer" not in replay(replay(STATE, fix(b"".join(events[:3]), STATE)), events[3])
        assert said(caplog) == [
            "agui-state sidecar died (agui-state exited with status -9 (signal SIGKILL)); starting a new one",
            f"agui-state sidecar restarted (pid {s.pid})",
            "/agent: the stream resumes on the new agui-state sidecar, its mirror rebuilt from the "
            f"{len(b''.join(events[:3]))} bytes answered for"]
        assert (await s.stats())["streams"] == 0, "closed at the end, on the new sidecar"
        # The next request is repaired on the same new sidecar.
        pid = s.pid
        mw = AguiStateMiddleware(stream_app(events), own=["/toolState"], join_keys=True, sidecar=s)
        assert body_of(await serve(mw, request(body))) == fix(b"".join(events), STATE)
        assert s.pid == pid


class SmallReplay(AsyncAguiState):
    """The real sidecar, with openStream's `replayBytes` made 100 on the way back: more than RUN_STARTED,
    less than the first three events (the sidecar's own figure is 8 MiB, which no test should stream)."""

    async def open_stream(self, **params: Any) -> Dict[str, Any]:  # type: ignore[override]
        opened: Dict[str, Any] = await super().open_stream(**params)
        return {**opened, "replayBytes": 100} if "replayBytes" in opened else opened


async def test_past_the_replay_limit_a_restart_starts_from_the_request_state_and_the_snapshot_adds_the_namespace(
        caplog: pytest.LogCaptureFixture) -> None:
    # Past replayBytes the text answered for is not kept: the new stream starts from the request's state
    # and the run's first event (fixStream's `head`), and the next snapshot goes out as one add of the owned
    # member, which applies whatever the client holds. The client's keys survive, and it ends on fix's state.
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    assert len(events[0]) <= 100 < len(b"".join(events[:3]))
    async with SmallReplay(BIN, env=child_env(), timeout=30) as s:
        got: List[bytes] = []
        between, record = kill_between(s, events, [3], got)
        mw = AguiStateMiddleware(stream_app(events, between=between), own=["/toolState"], join_keys=True,
                                 sidecar=s)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(body := json.dumps(RUN_INPUT).encode()), send=record)
        out = body_of(sent)
        head = fix(b"".join(events[:3]), STATE)
        assert out.startswith(head)
        first_after = json.loads(out[len(head):].split(b"\n\n")[0][6:])
        assert first_after["type"] == "STATE_DELTA" and first_after["delta"] == [
            {"op": "add", "path": "/toolState", "value": {"raster-ops/zoom": 3, "raster-ops/dataset": "era5"}}]
        assert replay(STATE, out) == replay(STATE, fix(b"".join(events), STATE))
        assert said(caplog)[-1] == ("/agent: the stream resumes on the new agui-state sidecar, from the "
                                    "request's state and the response's first event: more than 100 bytes "
                                    "had been answered for")
        mw = AguiStateMiddleware(stream_app(events), own=["/toolState"], join_keys=True, sidecar=s)
        assert body_of(await serve(mw, request(body))) == fix(b"".join(events), STATE)


async def test_a_sidecar_that_keeps_dying_is_restarted_twice_then_the_rest_goes_unrepaired(
        caplog: pytest.LogCaptureFixture) -> None:
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        got: List[bytes] = []
        pids: List[int] = []
        between, record = kill_between(s, events, [1, 2, 5], got, pids)
        mw = AguiStateMiddleware(stream_app(events, between=between), own=["/toolState"], join_keys=True,
                                 sidecar=s)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(json.dumps(RUN_INPUT).encode()), send=record)
        assert len(set(pids)) == 3, "three sidecars killed: the first and two restarted"
        # Repaired up to the third death; from there on, as the app sent it.
        assert body_of(sent) == fix(b"".join(events[:5]), STATE) + b"".join(events[5:])
        gave_up = [w for w in said(caplog) if "died 3 times" in w]
        assert gave_up == ["/agent: agui-state sidecar died 3 times during this response; the rest of it goes "
                           "through unrepaired"]
        assert said(caplog).count("agui-state sidecar died (agui-state exited with status -9 (signal SIGKILL)); "
                                  "starting a new one") == 3
        # The next request starts a fourth sidecar, and is repaired.
        mw = AguiStateMiddleware(stream_app(events), own=["/toolState"], join_keys=True, sidecar=s)
        assert body_of(await serve(mw, request(json.dumps(RUN_INPUT).encode()))) == fix(b"".join(events), STATE)
        assert s.pid not in pids


async def serve_agent_run(s: AsyncAguiState, caplog: pytest.LogCaptureFixture, level: int) -> List[bytes]:
    """The agent's run through the middleware on `s`, with agui_state.asgi logged from `level` on; the run's
    events as the app sent them."""
    events = [sse(e) for e in agent_events(RUN_INPUT)]
    mw = AguiStateMiddleware(stream_app(events), own=["/toolState"], join_keys=True, sidecar=s)
    with caplog.at_level(level, logger="agui_state.asgi"):
        await serve(mw, request(json.dumps(RUN_INPUT).encode()))
    return events


async def test_every_finding_is_said_with_its_outcome(caplog: pytest.LogCaptureFixture) -> None:
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        await serve_agent_run(s, caplog, logging.INFO)
    lines = [r.getMessage() for r in caplog.records if r.name == "agui_state.asgi" and r.levelno == logging.INFO]
    found = [line for line in lines if "agui-state findings:" in line]
    summary = [line for line in lines if "event stream fixed" in line]
    assert len(summary) == 1, lines
    counts = {o: 0 for o in ("passed", "mended", "discarded", "kept")}
    for line in found:
        for part in line.split("findings: ")[1].split(", "):
            n, outcome = part.split(" ")
            counts[outcome] += int(n)
    assert counts["mended"] > 0 and counts["kept"] > 0, found
    for outcome, n in counts.items():
        assert f"'{outcome}': {n}" in summary[0], (summary, counts)


async def test_each_finding_is_logged_at_debug_as_the_sidecar_gives_it(caplog: pytest.LogCaptureFixture) -> None:
    # Issue 32: every op the repair sends rewritten or leaves out is reported with its outcome, each on its
    # own: one DEBUG line per finding, the §13 finding as JSON, in order; the same list a stream of its own
    # gives for the whole response fed at once.
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        events = await serve_agent_run(s, caplog, logging.DEBUG)
        opened = await s.open_stream(state=STATE, own=["/toolState"], join_keys=True, framing="sse")
        whole = await s.fix_stream(opened["streamId"], b"".join(events).decode("utf-8"))
        closed = await s.close_stream(opened["streamId"])
    expected = whole["findings"] + closed["findings"]
    prefix = "/agent: agui-state finding: "
    logged = [r.getMessage()[len(prefix):] for r in caplog.records
              if r.name == "agui_state.asgi" and r.levelno == logging.DEBUG and r.getMessage().startswith(prefix)]
    assert [json.loads(line) for line in logged] == expected
    assert {f["outcome"] for f in expected} >= {"mended", "kept"}, expected
    assert all(line.isascii() for line in logged)


async def test_an_event_that_never_ends_is_passed_on_past_10_mib_not_held(caplog: pytest.LogCaptureFixture) -> None:
    # The app sends a delta to mend, then an event without its end, 64 KiB at a time, past the client's 10 MiB,
    # and waits. Meanwhile the client must have had the mended delta and more than 10 MiB of the long event:
    # the sidecar passed it on (§14), and the middleware, which keeps only the pending tail, wrote it.
    # Then the event ends, and the run with it.
    head = sse({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}) + \
        sse({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/todos/-", "value": "milk"}]})
    piece = b"x" * 65536
    endless = [b"data: " + piece] + [piece] * 170  # 10.6 MiB
    rest = [b"\n\n" + sse({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"})]
    chunks = [head] + endless + rest
    fixed_head = fix(head, STATE)
    assert fixed_head != head, "the head has a delta to mend"
    got: List[bytes] = []
    passed_on = asyncio.Event()

    async def record(message: Message) -> None:
        got.append(without_ids(message.get("body", b"")))  # the sidecar gives whole events: ids whole
        so_far = b"".join(got)
        if so_far.startswith(fixed_head) and len(so_far) - len(fixed_head) > 10 * 1024 * 1024:
            passed_on.set()

    before_the_end: List[bool] = []

    async def wait_before_the_end(i: int) -> None:
        if i == len(chunks) - 1:
            try:  # a hang guard: a middleware that holds the event would wait here forever
                await asyncio.wait_for(passed_on.wait(), 60)
            except asyncio.TimeoutError:
                pass
            before_the_end.append(passed_on.is_set())

    body = json.dumps(RUN_INPUT).encode()
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(stream_app(chunks, between=wait_before_the_end), own=["/toolState"],
                                 join_keys=True, sidecar=s)
        with caplog.at_level(logging.WARNING, logger="agui_state.asgi"):
            sent = await serve(mw, request(body), send=record)
        assert before_the_end == [True], "the mended delta and 10 MiB of the event reached the client before its end"
        assert body_of(sent) == fix(b"".join(chunks), STATE, status=1) == fixed_head + b"".join(endless + rest)
        assert (await s.stats())["streams"] == 0, "the sidecar's stream was closed"
    # The sidecar passed the event on itself (its pending dropped to 0): nothing failed, nothing to say here.
    warnings = [r.getMessage() for r in caplog.records if r.name == "agui_state.asgi"]
    assert warnings == [], warnings


async def test_one_sidecar_for_the_process_started_on_the_first_stream_and_closed_at_shutdown() -> None:
    def children() -> List[int]:
        """This process's children that run the sidecar, from /proc (fields after the name in stat)."""
        found: List[int] = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == os.getpid() and os.readlink(f"/proc/{pid}/exe") == os.path.realpath(BIN):
                    found.append(int(pid))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
        return found

    stream = b"".join(map(sse, agent_events(RUN_INPUT)))
    body = json.dumps(RUN_INPUT).encode()
    apps = [AguiStateMiddleware(stream_app([stream]), own=["/toolState"], join_keys=True) for _ in range(2)]
    lifespan = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def lifespan_app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        for reply in ("lifespan.startup.complete", "lifespan.shutdown.complete"):
            await receive()
            await send({"type": reply})

    before = children()
    shutdown = AguiStateMiddleware(lifespan_app)
    # New children only: a sidecar an earlier test left to exit may end meanwhile, which is not this test's.
    assert [p for p in children() if p not in before] == [], "nothing started before the first stream"
    for mw in apps:
        assert body_of(await serve(mw, request(body))) == fix(stream, STATE)
    started = [p for p in children() if p not in before]
    assert len(started) == 1, "one sidecar served both middlewares"
    sent: List[Message] = []

    async def receive() -> Message:
        return lifespan.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    await shutdown({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert started[0] not in children(), "closed and reaped at shutdown"


def sidecars() -> List[int]:
    """This process's children that run the sidecar, from /proc (fields after the name in stat)."""
    found: List[int] = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and os.readlink(f"/proc/{pid}/exe") == os.path.realpath(BIN):
                found.append(int(pid))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


async def takes_part(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    """An app that answers the lifespan protocol itself, as Starlette does."""
    assert scope["type"] == "lifespan"
    for reply in ("lifespan.startup.complete", "lifespan.shutdown.complete"):
        await receive()
        await send({"type": reply})


async def raises(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    """An app that knows only HTTP, as many hand-written ones do."""
    assert scope["type"] == "http", f"unsupported scope {scope['type']}"


async def returns(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    """An app that ignores every scope but HTTP."""


async def reads_then_raises(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    await receive()
    raise RuntimeError("not an HTTP request")


async def starts_with_the_app(app: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 31 §4: the sidecar starts at lifespan startup, whether the app takes part in the protocol or
    not. The server hears lifespan.startup.complete only once the sidecar runs (checked the moment it
    does), and a request after that finds it; at shutdown it is closed, and reaped, before
    lifespan.shutdown.complete."""
    before = sidecars()
    inbox: "asyncio.Queue[Message]" = asyncio.Queue()
    heard: List[Any] = []
    answered = asyncio.Event()

    async def send(message: Message) -> None:
        heard.append((message["type"], [p for p in sidecars() if p not in before]))
        answered.set()

    mw = AguiStateMiddleware(app, own=["/toolState"])
    assert [p for p in sidecars() if p not in before] == [], "nothing starts when the middleware is built"
    inbox.put_nowait({"type": "lifespan.startup"})
    lifespan = asyncio.ensure_future(mw({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send))
    # Until startup is answered, or the lifespan ends without an answer (it raises, then, for the app's error).
    await asyncio.wait({lifespan, asyncio.ensure_future(answered.wait())}, return_when=asyncio.FIRST_COMPLETED)
    assert heard, lifespan.result()
    assert heard[0][0] == "lifespan.startup.complete" and len(heard[0][1]) == 1, heard
    started = heard[0][1][0]
    stream = b"".join(map(sse, agent_events(RUN_INPUT)))
    served = AguiStateMiddleware(stream_app([stream]), own=["/toolState"], join_keys=True)
    assert body_of(await serve(served, request(json.dumps(RUN_INPUT).encode()))) == fix(stream, STATE)
    assert [p for p in sidecars() if p not in before] == [started], "the stream ran on the sidecar started then"
    inbox.put_nowait({"type": "lifespan.shutdown"})
    await lifespan
    assert heard[1] == ("lifespan.shutdown.complete", []), heard
    assert len(heard) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [], warnings


async def test_the_sidecar_starts_with_an_app_that_answers_lifespan_and_is_closed_with_it(
        caplog: pytest.LogCaptureFixture) -> None:
    await starts_with_the_app(takes_part, caplog)


async def test_the_sidecar_starts_with_an_app_that_raises_on_lifespan(caplog: pytest.LogCaptureFixture) -> None:
    await starts_with_the_app(raises, caplog)


async def test_the_sidecar_starts_with_an_app_that_ignores_lifespan(caplog: pytest.LogCaptureFixture) -> None:
    await starts_with_the_app(returns, caplog)


async def test_the_sidecar_starts_with_an_app_that_reads_startup_and_raises(caplog: pytest.LogCaptureFixture) -> None:
    await starts_with_the_app(reads_then_raises, caplog)


async def test_an_app_whose_startup_fails_is_heard_and_the_sidecar_closed() -> None:
    async def fails(scope: Dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no database"})

    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        heard: List[Message] = []

        async def send(message: Message) -> None:
            heard.append(message)
        inbox = [{"type": "lifespan.startup"}]

        async def receive() -> Message:
            return inbox.pop(0)
        pid = s.pid
        await AguiStateMiddleware(fails, sidecar=s)({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
        assert heard == [{"type": "lifespan.startup.failed", "message": "no database"}]
        assert s.pid == pid and (await s.stats())["streams"] == 0, "a given sidecar is the caller's: left running"
