"""Numbers keep their value and their kind through the sidecar (protocol/README.md §3, issue 22).

Each token is read with Python's own json.loads (an int or a float), sent through the sync client,
and read back: what comes back must be the same value of the same type (and a zero keeps its sign).
An integer beyond ±(2^53 − 1) must be refused with InvalidParamsError, reason UNSAFE_INTEGER, where the
server writes it (diffToolState's `set`); in openRun's `state`, a baseline the client sent, it is read as the
client's JSON.parse reads it: the double it holds (protocol/README.md §3, baselines).

The tokens are this file's list, or, when $AGUI_NUMBER_TOKENS names a file of tokens (one per line,
as test/clients/numbers.test.ts writes them), that file's; $AGUI_NUMBER_REPORT then receives one line
per token: the token, a tab, and `same` or `refused`.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Iterator, List

import pytest
from helpers import BIN, child_env

from agui_state import AguiState, InvalidParamsError

TOKENS = ["0", "-0", "1", "-1", "9007199254740991", "-9007199254740991", "9007199254740992", "1152921504606846976",
          "100000000000000000000", "1.0", "-0.0", "0.0", "1e2", "1.5e3", "1E-400", "100000000000000000000.0", "1e21",
          "0.5", "6.02e23", "0.99999999999999999", "5e-324", "-1.7976931348623157e308"]
MAX_SAFE = 2**53 - 1


def tokens() -> List[str]:
    path = os.environ.get("AGUI_NUMBER_TOKENS")
    if not path:
        return TOKENS
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def same_number(got: Any, want: Any, what: str) -> None:
    assert type(got) is type(want), f"{what}: came back as {got!r} ({type(got).__name__}), not {want!r} ({type(want).__name__})"
    assert got == want, f"{what}: came back as {got!r}, not {want!r}"
    if isinstance(want, float):
        assert math.copysign(1, got) == math.copysign(1, want), f"{what}: the sign of zero changed: {got!r}"


@pytest.fixture
def s() -> Iterator[AguiState]:
    with AguiState(BIN, env=child_env(), timeout=30) as sidecar:
        yield sidecar


def test_number_tokens_keep_value_and_kind(s: AguiState) -> None:
    report = []
    for i, token in enumerate(tokens()):
        want = json.loads(token)
        tid = f"n{i}"
        s.open_run(tid, state={"s": want}, tool_state={})
        try:
            change = s.diff_tool_state(tid, set={"n": want})
        except InvalidParamsError as e:
            assert isinstance(want, int) and abs(want) > MAX_SAFE, f"{token} was refused: {e}"
            assert (e.data["reason"], e.data["field"]) == ("UNSAFE_INTEGER", "/set/n"), f"{token}: {e.data}"
            assert "send it as a string" in str(e), str(e)
            # The baseline took it as the client holds it: the nearest double.
            held = s.get_state(tid)["state"]["s"]
            assert float(held) == float(want), f"{token} in openRun's state came back as {held!r}"
            report.append(f"{token}\trefused")
            continue
        assert not (isinstance(want, int) and abs(want) > MAX_SAFE), f"{token}, an integer beyond 2^53 - 1, was accepted"
        same_number(change["delta"][0]["value"], want, f"{token} in diffToolState's delta")
        state = s.get_state(tid)["state"]
        same_number(state["s"], want, f"{token} in getState")
        same_number(state["toolState"]["n"], want, f"{token} in the toolState of getState")
        # What a server does after a restart: open the thread again with the state it was given.
        s.open_run(f"r{i}", state=state)
        again = s.get_state(f"r{i}")["state"]
        same_number(again["s"], want, f"{token} after openRun with getState's output")
        report.append(f"{token}\tsame")
    out = os.environ.get("AGUI_NUMBER_REPORT")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in report))
