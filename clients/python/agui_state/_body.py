"""The request body in agui_state.asgi: handed to the app as it arrives, with a copy kept, up to
BASELINE_LIMIT, for its RunAgentInput (the baseline, protocol/README.md §13), as the proxy's tap does
(src/proxy/baseline.ts). Past the limit nothing is kept and the baseline is {}."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Dict, List, MutableMapping, Optional, Tuple

Message = MutableMapping[str, Any]

BASELINE_LIMIT = 64 << 20  # bytes of request body kept for the baseline: the proxy's and the Go middleware's


class BodyTap:
    """What of the request body went by: its bytes while they are within BASELINE_LIMIT, and whether it
    ended (its last message, or a disconnect that cut it off)."""

    def __init__(self) -> None:
        self.chunks: List[bytes] = []
        self.size = 0
        self.too_large = False
        self.ended = asyncio.Event()

    def take(self, message: Message) -> None:
        if self.ended.is_set():
            return
        if message["type"] != "http.request":  # the client left mid-body: what came is all there is
            self.ended.set()
            return
        body = message.get("body", b"")
        if not self.too_large:
            self.size += len(body)
            if self.size > BASELINE_LIMIT:
                self.too_large, self.chunks = True, []
            elif body:
                self.chunks.append(body)
        if not message.get("more_body", False):
            self.ended.set()

    def run_input(self, headers: Any) -> Tuple[Dict[str, Any], Optional[str]]:
        """The RunAgentInput ({} when there is none), and why it could not be read, when that is so."""
        for name, value in headers:
            if name.lower() == b"content-encoding" and value.strip().lower() not in (b"", b"identity"):
                return {}, "the request body is content-encoded"
        if self.too_large:
            return {}, f"the request body is too large to keep (more than {BASELINE_LIMIT >> 20} MiB)"
        if not self.size:
            return {}, None
        try:
            run_input = json.loads(b"".join(self.chunks))
        except ValueError:
            return {}, "the request body is not JSON"
        return (run_input, None) if isinstance(run_input, dict) else ({}, None)


def baseline(run_input: Dict[str, Any]) -> Tuple[Optional[Any], Optional[str]]:
    """RunAgentInput.state (None: leave it out, the sidecar starts from {}), and why not, when it is not."""
    state = run_input.get("state")
    if state is None or isinstance(state, dict):
        return state, None
    return None, "RunAgentInput.state is not an object"
