"""What a repaired response keeps of the text it gave the sidecar (protocol/README.md §14): the tail no reply
has answered for yet, to fail open with or to give a new sidecar again, and the text answered for, to replay
to a new sidecar after a restart. The sidecar says how long each is (fixStream's `pending` and `head`,
openStream's `replayBytes`): the middleware scans nothing itself.

Both hold the very bytes objects given to the sidecar (UTF-8, whole characters: _utf8.py), not copies: a part
is cut only where a reply's `pending` falls inside it."""
from __future__ import annotations

import collections
from typing import Deque, List, Optional

_BATCH = 1 << 20  # bytes per fixStream call of a replay at most: far below the sidecar's message limit (§7)


class Kept:
    """The unanswered tail and the replay of one stream, in UTF-8 bytes as the sidecar counts them."""

    def __init__(self, replay_bytes: int) -> None:
        self.limit = replay_bytes
        self.unanswered: Deque[bytes] = collections.deque()  # the end of what was sent no reply answered for yet
        self.unanswered_bytes = 0
        self.answered: Optional[List[bytes]] = []  # the text answered for, in parts; None past `limit`
        self.answered_bytes = 0
        self.head = b""  # the stream's first event, when it is a RUN_STARTED: the replay past `limit`

    def sent(self, data: bytes) -> None:
        if data:
            self.unanswered.append(data)
            self.unanswered_bytes += len(data)

    def replied(self, pending: int, head: Optional[int]) -> None:
        """A reply came: all but the last `pending` bytes sent so far are answered for. `head`, once: the
        stream's first `head` bytes are its RUN_STARTED."""
        cut = max(self.unanswered_bytes - max(pending, 0), 0)
        done: List[bytes] = []
        while cut > 0:
            part = self.unanswered.popleft()
            if len(part) > cut:  # the reply answered for this part's start only: the rest stays unanswered
                self.unanswered.appendleft(part[cut:])
                part = part[:cut]
            done.append(part)
            cut -= len(part)
            self.unanswered_bytes -= len(part)
        if head:
            self.head = b"".join([*(self.answered or ()), *done])[:head]
        if self.answered is None or not done:
            return
        size = sum(len(part) for part in done)
        if self.answered_bytes + size <= self.limit:
            self.answered.extend(done)
            self.answered_bytes += size
        else:
            self.answered, self.answered_bytes = None, 0

    def take(self) -> bytes:
        """The unanswered tail, taken out: what goes to the client as it came when the stream fails open, or to
        a new sidecar's stream (sent() keeps it anew)."""
        tail = b"".join(self.unanswered)
        self.unanswered.clear()
        self.unanswered_bytes = 0
        return tail

    def replay(self) -> List[bytes]:
        """What a new sidecar's stream is fed, its output dropped, to go on from where the client is: the text
        answered for, in parts of _BATCH bytes at most (each reply's part is whole events, so each is whole
        characters); past the limit the first event alone, when it is a RUN_STARTED."""
        if self.answered is None:
            return [self.head] if self.head else []
        parts: List[bytes] = []
        batch: List[bytes] = []
        size = 0
        for part in self.answered:
            if batch and size + len(part) > _BATCH:
                parts.append(b"".join(batch))
                batch, size = [], 0
            batch.append(part)
            size += len(part)
        if batch:
            parts.append(b"".join(batch))
        return parts

    def said(self) -> str:
        """What a replay starts the new stream from, for the log line."""
        if self.answered is not None:
            return f"its mirror rebuilt from the {self.answered_bytes} bytes answered for"
        return (f"from the request's state and the response's first event: more than {self.limit} bytes had "
                f"been answered for")
