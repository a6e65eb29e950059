"""The lifecycle of one handled request in agui_state.asgi (protocol/README.md §14, the middleware's states):
one phase at a time, moved only by the events of the table below, so that what the middleware does next is
read from one value rather than from a set of flags that must agree."""
from __future__ import annotations

import enum
from typing import Dict, Tuple


class Phase(enum.Enum):
    WAITING = "waiting"      # the request is handled, and the app has not sent its response head yet
    REPAIRING = "repairing"  # the response goes through the sidecar's stream
    PASSING = "passing"      # the response goes out as the app writes it (not a stream, or failed open)
    DETACHED = "detached"    # the client left a resumable run: the app's output is fed on, its text discarded
    ENDED = "ended"          # the response ended, broke off, or its run was cancelled


class Event(enum.Enum):
    OPENED = "opened"      # at the head: openStream gave a stream
    PASSED = "passed"      # at the head: not repaired (or openStream failed); later: a call failed (fail open)
    LEFT = "left"          # the client left a resumable run (detachStream gave a grace)
    ENDED = "ended"        # the app's response ended or broke off, or the run was cancelled


# The only moves there are (protocol/README.md §14); any other event in a phase leaves it as it is.
_NEXT: Dict[Tuple[Phase, Event], Phase] = {
    (Phase.WAITING, Event.OPENED): Phase.REPAIRING,
    (Phase.WAITING, Event.PASSED): Phase.PASSING,
    (Phase.WAITING, Event.ENDED): Phase.ENDED,
    (Phase.REPAIRING, Event.PASSED): Phase.PASSING,
    (Phase.REPAIRING, Event.LEFT): Phase.DETACHED,
    (Phase.REPAIRING, Event.ENDED): Phase.ENDED,
    (Phase.PASSING, Event.ENDED): Phase.ENDED,
    (Phase.DETACHED, Event.ENDED): Phase.ENDED,
}


class Lifecycle:
    """The phase of one request, and its moves. Each move says whether it happened: an event that does not
    apply (a second end, a failure after the run was cancelled) changes nothing."""

    def __init__(self) -> None:
        self.phase = Phase.WAITING

    def on(self, event: Event) -> bool:
        after = _NEXT.get((self.phase, event))
        if after is None:
            return False
        self.phase = after
        return True

    @property
    def writing(self) -> bool:
        """Whether what the response gets is still written to the client (not detached, not ended)."""
        return self.phase in (Phase.WAITING, Phase.REPAIRING, Phase.PASSING)
