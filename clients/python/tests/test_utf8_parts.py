"""The app's body as the sidecar is given it (agui_state/_utf8.py): whole characters of UTF-8 in each part, the
bytes as they came where they are UTF-8, and bad bytes replaced exactly as decoding the whole body with
errors="replace" (a TextDecoder) does, however the body is cut into chunks; then, through the middleware and
the real sidecar, a long stream (its parts going as the frame's attachment both ways) written as `fix` writes
it."""
from __future__ import annotations

import json
import random
from typing import List

from helpers import BIN, child_env
import pytest
from test_asgi import RUN_INPUT, STATE, body_of, fix, request, serve, stream_app
from test_attachment import texts_received

from agui_state import AsyncAguiState
from agui_state._framing import ATTACH_MIN
from agui_state._utf8 import Utf8Parts
from agui_state.asgi import AguiStateMiddleware

SEED = 41
PIECES = [b"a", b"{\"k\": 1}\n", "é".encode(), "…".encode(), "🌍".encode(), b"\xff", b"\xc3", b"\xe2\x80",
          b"\xf0\x9f\x8c", b"\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe0\x80\x80"]


def parts_of(data: bytes, cuts: List[int]) -> List[bytes]:
    utf8 = Utf8Parts()
    edges = [0, *cuts, len(data)]
    return [utf8.part(data[a:b], final=b == len(data)) for a, b in zip(edges, edges[1:])]


def test_every_cut_gives_whole_characters_and_the_replacements_of_the_whole() -> None:
    rng = random.Random(SEED)
    for _ in range(3000):
        data = b"".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12)))
        cuts = sorted(rng.sample(range(1, len(data)), min(rng.randint(0, 5), max(len(data) - 1, 0))))
        parts = parts_of(data, cuts)
        for part in parts:
            part.decode("utf-8")  # strict: each part is whole characters of UTF-8
        assert b"".join(parts) == data.decode("utf-8", "replace").encode("utf-8"), (data, cuts)


def test_ascii_and_whole_utf8_go_on_as_they_came() -> None:
    utf8 = Utf8Parts()
    ascii_chunk = b"data: {}\n\n" * 1000
    assert utf8.part(ascii_chunk, False) is ascii_chunk
    text = ("été 🌍" * 1000).encode("utf-8")
    assert utf8.part(text, False) is text
    assert utf8.part(text[:-2], False) == text[:-4] and utf8.part(text[-2:], True) == text[-4:]


async def test_a_long_stream_cut_inside_characters_with_bad_bytes_is_written_as_fix_writes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages long enough that each part goes as the attachment, with characters of 2, 3 and 4 bytes and a
    # byte that is not UTF-8 (fix, like the client, reads it as U+FFFD).
    text = ("été … 🌍 " * (ATTACH_MIN // 8)).encode("utf-8")
    events = [b'data: {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}\n\n',
              b'data: {"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}\n\n',
              b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"' + text + b'"}\n\n',
              b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"bad \xff byte ' + text + b'"}\n\n',
              b'data: {"type":"TEXT_MESSAGE_END","messageId":"m1"}\n\n',
              b'data: {"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}\n\n']
    stream = b"".join(events)
    # Every ATTACH_MIN bytes or so, a cut inside a character (the first continuation byte from there); after
    # the first, a second cut inside the same character when it has room for one.
    cuts = []
    for at in range(ATTACH_MIN + 1000, len(stream), ATTACH_MIN + 7):
        while stream[at] & 0xC0 != 0x80:
            at += 1
        cuts += [at, at + 1] if stream[at + 1] & 0xC0 == 0x80 else [at]
    assert len(cuts) > 4 and any(b == a + 1 for a, b in zip(cuts, cuts[1:]))
    parts = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
    replies = texts_received(monkeypatch)
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(stream_app(parts), own=["/toolState"], join_keys=True, sidecar=s)
        sent = await serve(mw, request(json.dumps(RUN_INPUT).encode()))
    expected = fix(stream, STATE)
    assert "\ufffd".encode("utf-8") in expected
    assert body_of(sent) == expected
    assert replies, "the repaired text came back as an attachment"
