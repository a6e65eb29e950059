"""The wire codec (agui_state/_wire.py) against the json module it stands in for.

encode must give the bytes json.dumps gives for the same request, and the replies of a line must be
what json.loads reads in it, for seeded random JSON values (unicode, lone surrogates, whole and
fractional floats, ints beyond 64 bits, deep nesting), on the C path and on the plain-json fallback.
A failed encode must leave nothing behind that refuses the next request.
"""
from __future__ import annotations

import json
import random
from typing import Any, Callable, Iterator

import pytest

from agui_state import _wire

SEED = 2026_12_02
CASES = 400
STRINGS = ["", "plain", "raster-ops/dataset", "a~b", "é", "日本", "\U0001f600", "\ud800", "\"quoted\"\\", "\n\t\x00"]
NUMBERS = [0, -0.0, 1, -1, 1.0, 1e2, 0.5, 2**53 - 1, 2**70, -2**64, 5e-324, 1.7976931348623157e308, True, False]


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(6 if depth < 6 else 3)
    if kind == 0:
        return rng.choice(STRINGS) + rng.choice(STRINGS)
    if kind == 1:
        return rng.choice(NUMBERS) if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
    if kind == 2:
        return None
    if kind == 3:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(STRINGS) + str(i): value(rng, depth + 1) for i in range(rng.randrange(4))}


def requests() -> Iterator[tuple[int, str, Any]]:
    rng = random.Random(SEED)
    for i in range(CASES):
        yield i, rng.choice(["applyOps", "diffToolState", "fixStream"]), {"threadId": f"t{i}", "value": value(rng)}


def dumps_line(msg_id: int, method: str, params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params},
                      allow_nan=False).encode("ascii") + b"\n"


def each_path(check: Callable[[], None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs `check` on the C encoder and scanner, then on the plain json fallback."""
    assert _wire._ENCODE is not None, "this Python has json's C encoder: the fast path is under test"
    check()
    monkeypatch.setattr(_wire, "_ENCODE", None)
    monkeypatch.setattr(_wire, "_DECODER", json.JSONDecoder())
    monkeypatch.setattr(_wire._DECODER, "scan_once", json.scanner.py_make_scanner(_wire._DECODER))
    check()


def test_encode_writes_the_bytes_json_dumps_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    def check() -> None:
        for msg_id, method, params in requests():
            assert _wire.encode(msg_id, method, params) == dumps_line(msg_id, method, params), (method, params)
    each_path(check, monkeypatch)


def test_replies_read_what_json_loads_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def check() -> None:
        for msg_id, _, params in requests():
            line = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": params}).encode()
            got = _wire.replies(line)
            assert len(got) == 1 and json.dumps(got[0]) == json.dumps(json.loads(line))
            assert _wire.replies(b"  " + line + b" \r") == got, "whitespace around the value is JSON too"
            batch = b"[" + line + b", 7, {\"no\": \"id\"}]"
            assert _wire.replies(batch) == got, "a batch: its replies, nothing else"
        for garbage in [b"", b"   ", b"not json", b'{"id": 1} trailing', b'{"id": 1', b"\xff\xfe", b"42", b'"id"']:
            assert _wire.replies(garbage) == [], garbage
    each_path(check, monkeypatch)


def test_what_cannot_be_encoded_is_refused_and_leaves_the_encoder_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    def check() -> None:
        cyclic: dict[str, Any] = {"a": [1]}
        cyclic["a"].append(cyclic)
        for culprit, error in [(float("nan"), ValueError), (float("inf"), ValueError), (object(), TypeError),
                               (cyclic, ValueError)]:
            bad = {"x": [{"rows": [1, 2]}, culprit]}
            with pytest.raises(error):
                _wire.encode(1, "applyOps", bad)
            # The same containers, without the culprit: encoded, not refused as circular by what the
            # failed encode left in a markers dict.
            bad["x"].pop()
            assert _wire.encode(2, "applyOps", bad) == dumps_line(2, "applyOps", bad)
    each_path(check, monkeypatch)
