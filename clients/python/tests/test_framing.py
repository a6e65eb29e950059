"""The asyncio client's framing (agui_state/_framing.py, protocol/README.md §2): a request as an LSP frame,
a long text as its attachment, and the reply frames read back, whatever the chunks they come in.
"""
from __future__ import annotations

import json
import random
from typing import Any, List, Tuple

import pytest

from agui_state import _framing
from agui_state._framing import ATTACH_MIN, Body, FrameReader, FramingError, frame

SEED = 2026_12_07
# Every width of UTF-8 (1 to 4 bytes), so that slices and chunk cuts land inside characters.
ALPHABET = "a~\"\\\n\té日\U0001f600"


def text_of(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(size))


def parse(data: bytes) -> Tuple[dict, Any, bytes]:
    """A request frame's headers, its JSON and its attachment, read as the sidecar reads them."""
    head, _, rest = data.partition(b"\r\n\r\n")
    headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
    n = int(headers[b"Content-Length"])
    m = int(headers.get(b"Agui-Text-Length", b"0"))
    assert len(rest) == n + m, "the frame is exactly its JSON and its attachment"
    return headers, json.loads(rest[:n]), rest[n:]


def test_a_short_request_is_its_json_in_one_frame() -> None:
    params = {"streamId": "s1", "text": "data: {}\n\né\ud800"}
    headers, msg, attached = parse(frame(7, "fixStream", params))
    assert list(headers) == [b"Content-Length"] and attached == b""
    assert msg == {"jsonrpc": "2.0", "id": 7, "method": "fixStream", "params": params}


def test_a_long_fix_stream_text_goes_as_utf8_after_the_json_and_asks_for_its_reply_so() -> None:
    text = text_of(random.Random(SEED), 2 * 1024 * 1024 + 3)  # past _SLICE: encoded in slices
    assert len(text) > _framing._SLICE
    params = {"streamId": "s1", "text": text}
    headers, msg, attached = parse(frame(3, "fixStream", params))
    assert headers[b"Agui-Reply-Text"] == b"attachment"
    assert msg == {"jsonrpc": "2.0", "id": 3, "method": "fixStream", "params": {"streamId": "s1"}}
    assert attached == text.encode("utf-8")
    assert params["text"] is text, "the caller's params are left as they were"


def test_a_text_given_as_utf8_bytes_goes_as_they_are_or_short_in_the_json() -> None:
    # The middleware's (agui_state/_utf8.py: whole characters of UTF-8), long: the attachment is that object's
    # bytes and the reply is asked for as one; short: the JSON string the same text makes.
    text = text_of(random.Random(SEED + 1), ATTACH_MIN).encode("utf-8")
    headers, msg, attached = parse(frame(4, "fixStream", {"streamId": "s1", "text": text}))
    assert headers[b"Agui-Reply-Text"] == b"attachment" and attached == text
    assert msg["params"] == {"streamId": "s1"}
    short = "data: {\"a\": \"é日😀\"}\n\n"
    headers, msg, attached = parse(frame(5, "fixStream", {"streamId": "s1", "text": short.encode("utf-8")}))
    assert list(headers) == [b"Content-Length"] and attached == b""
    assert msg["params"] == {"streamId": "s1", "text": short}


def test_the_threshold() -> None:
    for size, goes in [(ATTACH_MIN - 1, False), (ATTACH_MIN, True)]:
        _, msg, attached = parse(frame(1, "fixStream", {"streamId": "s", "text": "x" * size}))
        assert (attached == b"x" * size and "text" not in msg["params"]) if goes else \
            (attached == b"" and msg["params"]["text"] == "x" * size)


def test_a_text_with_a_lone_surrogate_stays_in_the_json() -> None:
    for at in (0, ATTACH_MIN // 2, _framing._SLICE + 5):
        text = "é" * (ATTACH_MIN + _framing._SLICE)
        text = text[:at] + "\udc80" + text[at:]
        _, msg, attached = parse(frame(1, "fixStream", {"streamId": "s", "text": text}))
        assert attached == b"" and msg["params"]["text"] == text


def test_an_open_stream_body_goes_as_the_attachment_and_the_rest_of_the_request_in_the_json() -> None:
    body = json.dumps({"threadId": "t", "state": {"big": text_of(random.Random(SEED + 1), 300_000)}})
    request = {"method": "POST", "path": "/agent", "headers": [["content-type", "application/json"]], "body": body}
    params = {"own": ["/table"], "request": request, "response": {"status": 200, "headers": []}}
    headers, msg, attached = parse(frame(9, "openStream", params))
    assert attached == body.encode("utf-8") and b"Agui-Reply-Text" not in headers
    assert msg["params"] == {**params, "request": {k: v for k, v in request.items() if k != "body"}}
    assert request["body"] is body, "the caller's request is left as it was"


def test_other_methods_and_other_members_never_attach() -> None:
    long = "x" * (ATTACH_MIN * 2)
    for method, params in [("applyOps", {"threadId": "t", "text": long}), ("fixStream", {"streamId": "s", "body": long}),
                           ("openStream", {"body": long}), ("rejoinStream", {"request": {"body": long}}),
                           ("openStream", {"request": {"body": ["x"] * ATTACH_MIN}})]:
        _, msg, attached = parse(frame(1, method, params))
        assert attached == b"" and msg["params"] == params, method


def test_what_cannot_be_encoded_is_refused_before_anything_is_framed() -> None:
    with pytest.raises(ValueError):
        frame(1, "fixStream", {"streamId": float("nan"), "text": "x" * ATTACH_MIN})


# The reader.

def reply_frames(rng: random.Random, count: int, sizes: Tuple[int, ...]) -> Tuple[bytes, List[Body]]:
    """`count` reply frames, some with a second header (before or after Content-Length), one empty body,
    some with the result's text as the attachment (protocol/README.md §2, Agui-Reply-Text)."""
    data, bodies = bytearray(), []
    for i in range(count):
        text = text_of(rng, rng.choice(sizes))
        attach = i % 3 == 2
        body = b"" if i == 3 else json.dumps({"jsonrpc": "2.0", "id": i, "result": {} if attach else {"text": text}},
                                             ensure_ascii=False).encode()
        extra = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" if i % 5 == 1 else b""
        if attach:
            extra += b"agui-text-length:%d\r\n" % len(text.encode()) if i % 2 else \
                b"Agui-Text-Length: %d\r\n" % len(text.encode())
        data += (extra + b"Content-Length: %d\r\n\r\n" % len(body) if i % 2 else
                 b"Content-Length: %d\r\n%b\r\n" % (len(body), extra)) + body + (text.encode() if attach else b"")
        bodies.append((body, text.encode() if attach else None))
    return bytes(data), bodies


def test_the_reader_gives_every_body_whatever_the_chunks() -> None:
    rng = random.Random(SEED + 2)
    for cuts in ("whole", "bytes", "random"):
        # Byte by byte, short bodies; else long ones too, cut anywhere from 1 byte to more than a frame.
        data, bodies = reply_frames(rng, 40, (0, 5, 300) if cuts == "bytes" else (0, 5, 300, 70_000, 400_000))
        reader, got = FrameReader(), []
        pos = 0
        while pos < len(data):
            step = len(data) if cuts == "whole" else 1 if cuts == "bytes" else \
                rng.choice([1, 2, 3, 17, 4096, 65536, 300_000])
            got += reader.feed(data[pos:pos + step])
            pos += step
        assert got == bodies and not reader.pending, cuts


def test_a_body_cut_off_is_pending_not_given() -> None:
    reader = FrameReader()
    assert reader.feed(b"Content-Length: 10\r\n\r\n{\"id\"") == [] and reader.pending
    assert reader.feed(b":1}") == []
    assert reader.feed(b"  Content-Length: 2\r\n\r\n{}") == [(b'{"id":1}  ', None), (b"{}", None)]
    assert not reader.pending
    assert reader.feed(b"Content-Length: 2\r\nAgui-Text-Length: 3\r\n\r\n{}\xc3\xa9") == [] and reader.pending
    assert reader.feed(b"!") == [(b"{}", "\u00e9!".encode())] and not reader.pending


NOT_FRAMES = [
    b"{\"jsonrpc\":\"2.0\"}\n",                    # an NDJSON line: no header block at all
    b"Content-Length: x1\r\n\r\n",
    b"Content-Length: -1\r\n\r\n",
    b"Content-Length: 1 2\r\n\r\n",
    b"Content-Length: \xd9\xa1\r\n\r\n",           # a digit, but not an ASCII one
    b"Content-Type: a\r\n\r\n",                    # no Content-Length
    b"Content-Length: 1\r\nContent-Length: 1\r\n\r\n",
    b"Content-Length 1\r\nX: y\r\n\r\n",
    b"Content-Length: 2\r\nAgui-Text-Length: 1x\r\n\r\n",
    b"Content-Length: 2\r\nAgui-Text-Length: 1\r\nagui-text-length: 1\r\n\r\n",
    b" Content-Length: 1\r\nX: y\r\n\r\n",
]


def test_what_is_not_a_frame_is_refused() -> None:
    for bad in NOT_FRAMES:
        with pytest.raises(FramingError):
            FrameReader().feed(bad + b"{}")
            pytest.fail(f"read as a frame: {bad!r}")


def test_a_header_without_its_end_is_refused_past_its_limit() -> None:
    reader = FrameReader()
    assert reader.feed(b"Content-Length: 2\r\n" + b"X" * 100) == []
    with pytest.raises(FramingError):
        for _ in range(100):
            reader.feed(b"X" * 100)
