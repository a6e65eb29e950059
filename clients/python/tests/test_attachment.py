"""A long text as the frame's attachment (agui_state/_framing.py, protocol/README.md §2), against the real
sidecar: fixStream's `text` and openStream's `request.body` sent as raw UTF-8 are read exactly as the same
text sent in JSON (the sync client's NDJSON line, or short calls under the attachment threshold); a text
that cannot be UTF-8 (a lone surrogate) still goes in the JSON, and is read as before.
"""
from __future__ import annotations

import json
import random
from typing import Any, Dict, List

import pytest

from helpers import BIN, child_env

from agui_state import AguiState, AsyncAguiState, _async, _calls, _framing
from agui_state._framing import ATTACH_MIN

SEED = 2026_12_07
WORDS = ["raster", "era5", "é", "日本語", "\U0001f600", "a\"b", "\\", "tab\there", "x" * 40]
OWN = ["/table"]


def sse(event: Dict[str, Any]) -> str:
    return "data: " + json.dumps(event, ensure_ascii=False) + "\n\n"


def table(rng: random.Random, rows: int) -> List[Dict[str, Any]]:
    return [{"id": i, "name": " ".join(rng.choice(WORDS) for _ in range(6)), "score": rng.random()} for i in range(rows)]


def stream_text(rng: random.Random) -> str:
    """A run of ~2 MB (non-ASCII throughout): whole-state snapshots of an owned member, each a little changed,
    text between them, and a delta that does not apply (a finding)."""
    rows = table(rng, 5000)
    events = [{"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}]
    for n in range(4):
        rows[n * 7]["score"] = n
        events.append({"type": "STATE_SNAPSHOT", "snapshot": {"table": rows, "status": f"step {n} é"}})
        events.append({"type": "TEXT_MESSAGE_START", "messageId": f"m{n}", "role": "assistant"})
        events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{n}", "delta": "日本語 \U0001f600 " * 50})
        events.append({"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"})
    events.append({"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/nowhere/x", "value": 1}]})
    events.append({"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"})
    return "".join(map(sse, events))


def frames_sent(monkeypatch: pytest.MonkeyPatch) -> List[bytes]:
    """The frames the asyncio client writes from here on (the real ones: the spy only keeps a copy)."""
    sent: List[bytes] = []
    real = _calls.frame

    def spy(*args: Any) -> bytes:
        out = real(*args)
        sent.append(out)
        return out

    monkeypatch.setattr(_calls, "frame", spy)
    return sent


def texts_received(monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """The reply texts the asyncio client reads as a frame's attachment from here on (a real reader's)."""
    texts: List[str] = []

    class Recording(_framing.FrameReader):
        def feed(self, data: bytes) -> List[_framing.Body]:
            bodies = super().feed(data)
            texts.extend(text.decode() for _, text in bodies if text is not None)
            return bodies

    monkeypatch.setattr(_calls, "FrameReader", Recording)
    return texts


def attached(frame: bytes) -> int:
    """The length of a request frame's attachment (0: none), from its header block."""
    head = frame[:frame.index(b"\r\n\r\n")].split(b"\r\n")
    return next((int(h.split(b":")[1]) for h in head if h.lower().startswith(b"agui-text-length:")), 0)


def joined(replies: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The replies of a text fed in parts, as one reply to the whole: texts and findings joined, counts
    summed, `pending` the last one's, `head` the one that said it."""
    out: Dict[str, Any] = {"text": "".join(r["text"] for r in replies),
                           "findings": [f for r in replies for f in r["findings"]]}
    for count in ("passed", "mended", "discarded", "kept"):
        out[count] = sum(r[count] for r in replies)
    out["pending"] = replies[-1]["pending"]
    heads = [r["head"] for r in replies if "head" in r]
    if heads:
        out["head"] = heads[0]
    return out


async def test_a_2_mb_fix_stream_text_as_the_attachment_is_read_as_the_same_text_in_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = stream_text(random.Random(SEED))
    assert len(text.encode("utf-8")) > 2_000_000 and len(text.encode("utf-8")) > len(text)
    cut = text.rindex("data: ", 0, len(text) - 1000) + 3  # the last call ends inside an event: `pending`
    sent, received = frames_sent(monkeypatch), texts_received(monkeypatch)
    async with AsyncAguiState(BIN, env=child_env(), timeout=60) as s:
        opened = await s.open_stream(framing="sse", own=OWN, state={"table": [], "status": ""})
        whole = await s.fix_stream(opened["streamId"], text[:cut])
        assert received == [whole["text"]], "its repaired text came back as the reply's attachment"
        closed = await s.close_stream(opened["streamId"])
        assert [attached(f) for f in sent] == [0, len(text[:cut].encode("utf-8")), 0], "the text went attached"
        # The same text in calls under the threshold, each in the JSON.
        opened = await s.open_stream(framing="sse", own=OWN, state={"table": [], "status": ""})
        step = ATTACH_MIN // 4
        parts = [await s.fix_stream(opened["streamId"], text[i:min(i + step, cut)]) for i in range(0, cut, step)]
        assert not any(attached(f) for f in sent[3:])
        assert await s.close_stream(opened["streamId"]) == closed
    assert whole["findings"] and whole["pending"] > 0 and "STATE_DELTA" in whole["text"]
    assert joined(parts) == whole
    # And in one NDJSON line, the sync client's.
    with AguiState(BIN, env=child_env(), timeout=60) as sync:
        opened = sync.open_stream(framing="sse", own=OWN, state={"table": [], "status": ""})
        assert sync.fix_stream(opened["streamId"], text[:cut]) == whole
        assert sync.close_stream(opened["streamId"]) == closed


async def test_a_3_mb_open_stream_body_as_the_attachment_is_the_same_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(SEED + 1)
    state = {"table": table(rng, 28000), "status": "ready é"}
    body = json.dumps({"threadId": "t1", "runId": "r1", "state": state, "messages": [], "tools": [], "context": [],
                       "forwardedProps": {}}, ensure_ascii=False)
    assert len(body.encode("utf-8")) > 3_000_000
    request = {"method": "POST", "path": "/agent", "headers": [["Content-Type", "application/json"]], "body": body}
    head = {"status": 200, "headers": [["Content-Type", "text/event-stream"]]}
    # The server's first snapshot: the baseline with one row changed. Against the baseline read from the
    # body, it goes to the client as a STATE_DELTA of that row only (protocol/README.md §13).
    changed = json.loads(json.dumps(state))
    changed["table"][4321]["name"] = "renamed 日本"
    text = sse({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}) + sse({"type": "STATE_SNAPSHOT", "snapshot": changed})
    sent = frames_sent(monkeypatch)
    async with AsyncAguiState(BIN, env=child_env(), timeout=60) as s:
        opened = await s.open_stream(own=OWN, request=request, response=head, resume=False)
        fixed = await s.fix_stream(opened["streamId"], text)
        await s.close_stream(opened["streamId"])
    assert attached(sent[0]) == len(body.encode("utf-8")) and attached(sent[1]) > 0
    assert "baseline" not in opened
    delta = [json.loads(line[6:]) for line in fixed["text"].split("\n") if line.startswith("data: ")][1]
    assert delta == {"type": "STATE_DELTA", "delta": [
        {"op": "replace", "path": "/table/4321/name", "value": "renamed 日本"}]}, "the body's state was the baseline"
    with AguiState(BIN, env=child_env(), timeout=60) as sync:
        again = sync.open_stream(own=OWN, request=request, response=head, resume=False)
        assert {k: v for k, v in again.items() if k != "streamId"} == {k: v for k, v in opened.items() if k != "streamId"}
        assert sync.fix_stream(again["streamId"], text) == fixed


async def test_a_long_text_with_a_lone_surrogate_goes_in_the_json_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    # json.loads gives such a string for "\ud800" (an app's text may hold one): UTF-8 cannot carry it, the
    # JSON escape can, and the sidecar reads it as JavaScript does.
    text = sse({"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}) + "data: " + json.dumps(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "é" * ATTACH_MIN})[:-2] + "\ud800\"}\n\n"
    body = json.dumps({"threadId": "t1", "state": {"table": ["x" * ATTACH_MIN]}})[:-3] + "\udc00\"]}}"
    request = {"method": "POST", "path": "/agent", "headers": [["Content-Type", "application/json"]], "body": body}
    head = {"status": 200, "headers": [["Content-Type", "text/event-stream"]]}
    sent = frames_sent(monkeypatch)
    async with AsyncAguiState(BIN, env=child_env(), timeout=60) as s:
        opened = await s.open_stream(own=OWN, request=request, response=head, resume=False)
        fixed = await s.fix_stream(opened["streamId"], text)
        closed = await s.close_stream(opened["streamId"])
    assert [attached(f) for f in sent] == [0, 0, 0]
    assert "\ud800" in fixed["text"] or "\\ud800" in fixed["text"], fixed["text"][-80:]
    with AguiState(BIN, env=child_env(), timeout=60) as sync:
        again = sync.open_stream(own=OWN, request=request, response=head, resume=False)
        assert {k: v for k, v in again.items() if k != "streamId"} == {k: v for k, v in opened.items() if k != "streamId"}
        assert sync.fix_stream(again["streamId"], text) == fixed
        assert sync.close_stream(again["streamId"]) == closed


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
async def test_the_pipes_to_and_from_the_sidecar_hold_a_mebibyte() -> None:
    # A megabyte attachment then crosses in one write, not sixteen of Linux's default 64 KiB, each waking the
    # other side; and the sidecar still answers through them.
    import fcntl
    with open("/proc/sys/fs/pipe-max-size") as f:
        assert int(f.read()) >= _async._PIPE_BYTES, "this system caps pipes below what the client asks"
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        transport = s._live().transport
        for fd in (0, 1):
            pipe = transport.get_pipe_transport(fd).get_extra_info("pipe")
            assert fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ) == _async._PIPE_BYTES, fd
        opened = await s.open_stream(state={})
        text = 'data: {"type":"RUN_STARTED","threadId":"t","runId":"r","input":"' + "x" * (2 << 20) + '"}\n\n'
        assert (await s.fix_stream(opened["streamId"], text))["text"] == text
