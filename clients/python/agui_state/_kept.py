"""What a repaired response keeps of the text it gave the sidecar (protocol/README.md §14): the tail no reply
has answered for yet, to fail open with or to give a new sidecar again, and the text answered for, to replay
to a new sidecar after a restart. The sidecar says how long each is (fixStream's `pending` and `head`,
openStream's `replayBytes`): the middleware scans nothing itself."""
from __future__ import annotations

from typing import List, Optional

_BATCH = 1 << 20  # bytes per fixStream call of a replay at most: far below the sidecar's message limit (§7)


class Kept:
    """The unanswered tail and the replay of one stream, in UTF-8 bytes as the sidecar counts them."""

    def __init__(self, replay_bytes: int) -> None:
        self.limit = replay_bytes
        self.unanswered = bytearray()  # the end of what was sent that no reply answered for yet
        self.answered: Optional[List[bytes]] = []  # the text answered for, each reply's part; None past `limit`
        self.answered_bytes = 0
        self.head = b""  # the stream's first event, when it is a RUN_STARTED: the replay past `limit`

    def sent(self, text: str) -> None:
        self.unanswered += text.encode("utf-8")

    def replied(self, pending: int, head: Optional[int]) -> None:
        """A reply came: all but the last `pending` bytes sent so far are answered for. `head`, once: the
        stream's first `head` bytes are its RUN_STARTED."""
        cut = max(len(self.unanswered) - max(pending, 0), 0)
        done = bytes(self.unanswered[:cut])
        del self.unanswered[:cut]
        if head:
            self.head = (b"".join(self.answered or ()) + done)[:head]
        if self.answered is None or not done:
            return
        if self.answered_bytes + len(done) <= self.limit:
            self.answered.append(done)
            self.answered_bytes += len(done)
        else:
            self.answered, self.answered_bytes = None, 0

    def take(self) -> bytes:
        """The unanswered tail, taken out: what goes to the client as it came when the stream fails open."""
        tail = bytes(self.unanswered)
        self.unanswered.clear()
        return tail

    def again(self) -> str:
        """The unanswered tail, taken out, as text to send to a new sidecar's stream (sent() keeps it anew)."""
        return self.take().decode("utf-8", "replace")

    def replay(self) -> List[str]:
        """What a new sidecar's stream is fed, its output dropped, to go on from where the client is: the text
        answered for, in parts of _BATCH bytes at most (each reply's part is whole events, so each is whole
        characters); past the limit the first event alone, when it is a RUN_STARTED."""
        if self.answered is None:
            return [self.head.decode("utf-8", "replace")] if self.head else []
        parts: List[str] = []
        batch: List[bytes] = []
        size = 0
        for part in self.answered:
            if batch and size + len(part) > _BATCH:
                parts.append(b"".join(batch).decode("utf-8", "replace"))
                batch, size = [], 0
            batch.append(part)
            size += len(part)
        if batch:
            parts.append(b"".join(batch).decode("utf-8", "replace"))
        return parts

    def said(self) -> str:
        """What a replay starts the new stream from, for the log line."""
        if self.answered is not None:
            return f"its mirror rebuilt from the {self.answered_bytes} bytes answered for"
        return (f"from the request's state and the response's first event: more than {self.limit} bytes had "
                f"been answered for")
