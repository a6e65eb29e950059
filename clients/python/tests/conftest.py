"""pytest set-up for the client tests: the package is imported from this source tree, and the sidecar
is the binary that $AGUI_STATE_BIN names (test/clients/python.test.ts points it at dist/agui-state):

    AGUI_STATE_BIN=dist/agui-state /usr/bin/python3 -m pytest -q clients/python/tests
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SOURCE))  # before any installed agui_state: these tests are about this tree


def pytest_configure(config: pytest.Config) -> None:
    binary = os.environ.get("AGUI_STATE_BIN")
    if not binary or not os.access(binary, os.X_OK):
        raise pytest.UsageError(f"AGUI_STATE_BIN must name the sidecar executable (dist/agui-state); it is {binary!r}")
    import agui_state
    if Path(agui_state.__file__).resolve().parent != SOURCE / "agui_state":
        raise pytest.UsageError(f"agui_state was imported from {agui_state.__file__}, not from {SOURCE}")
