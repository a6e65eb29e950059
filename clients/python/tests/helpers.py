"""What both clients' tests share: the python3-jsonpatch witness (of a thread's state and of its
activities), strict JSON equality, and stand-in sidecars for what the real one cannot be made to show on
demand (replies held back or reordered, a death while a call waits, the exact params on the wire).
Everything else runs against the real binary."""
from __future__ import annotations

import copy
import json
import os
import sys
from typing import Any, Dict, List, Tuple

import jsonpatch

# Absolute, so that the documented `AGUI_STATE_BIN=dist/agui-state pytest ...` also works where a test
# links to it from elsewhere.
BIN = os.path.abspath(os.environ["AGUI_STATE_BIN"]) if os.environ.get("AGUI_STATE_BIN") else ""

# What every stand-in below speaks: requests in either framing (protocol/README.md §2), NDJSON lines (the
# sync client) or LSP frames (the asyncio client), a long text as the frame's attachment put back where it
# belongs in params; each reply in the framing its request came in, as the sidecar answers.
WIRE = ("import sys, json\n"
        "inp, out = sys.stdin.buffer, sys.stdout.buffer\n"
        "wire = {'framing': 'ndjson', 'attached': 0}\n"
        "def read(first=b''):\n"
        "    line = first + inp.readline()\n"
        "    if not line.startswith(b'Content-Length:'):\n"
        "        wire.update(framing='ndjson', attached=0)\n"
        "        return json.loads(line) if line.strip() else None\n"
        "    n, m, h = int(line.split(b':')[1]), 0, None\n"
        "    while h not in (b'\\r\\n', b''):\n"
        "        h = inp.readline()\n"
        "        if h.lower().startswith(b'agui-text-length:'): m = int(h.split(b':')[1])\n"
        "    r = json.loads(inp.read(n))\n"
        "    wire.update(framing='lsp', attached=m)\n"
        "    if m:\n"
        "        text = inp.read(m).decode('utf-8')\n"
        "        if r['method'] == 'fixStream': r['params']['text'] = text\n"
        "        else: r['params']['request']['body'] = text\n"
        "    return r\n"
        "def write(msg):\n"
        "    data = json.dumps(msg).encode()\n"
        "    out.write(b'Content-Length: %d\\r\\n\\r\\n' % len(data) + data if wire['framing'] == 'lsp' else data + b'\\n')\n"
        "    out.flush()\n"
        "def reply(r, result):\n"
        "    return {'jsonrpc': '2.0', 'id': r['id'], 'result': result}\n")

# Answers each request at once with its method and params, exactly as they arrived on stdin, and how
# they came (`wire`: the framing, and the attachment's length).
ECHO = WIRE + ("for r in iter(read, None):\n"
               "    write(reply(r, {'method': r['method'], 'params': r['params'], 'wire': dict(wire)}))\n")

# Reads `n` requests, then answers them in reverse order (echoing each one's params), then waits for EOF.
REVERSE = WIRE + ("n = int(sys.argv[1])\n"
                  "reqs = [read() for _ in range(n)]\n"
                  "for r in reversed(reqs):\n"
                  "    write(reply(r, r['params']))\n"
                  "inp.read()\n")

# Echoes params, but holds every reply back until a request for "release" comes, then answers what it
# holds in reverse order, "release" last. "sync" is answered at once: when its reply is back, every
# request sent before it has been read.
HOLD = WIRE + ("held = []\n"
               "for r in iter(read, None):\n"
               "    if r['method'] == 'sync':\n"
               "        write(reply(r, r['params']))\n"
               "    elif r['method'] == 'release':\n"
               "        for h in reversed(held): write(h)\n"
               "        held = []\n"
               "        write(reply(r, r['params']))\n"
               "    else:\n"
               "        held.append(reply(r, r['params']))\n")

# Reads one request and kills itself with SIGKILL: the call waiting for its reply must fail.
DIE_AFTER_ONE: Tuple[str, List[str]] = ("/bin/sh", ["-c", "read line; kill -9 $$"])

PY = sys.executable


def child_env() -> Dict[str, str]:
    """The sidecar's environment: ours, less NODE_OPTIONS (a test runner's loader hooks)."""
    return {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}


def same(a: Any, b: Any) -> bool:
    """JSON equality, strictly typed: true is not 1, but 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


class Witness:
    """The AG-UI client's copy of one thread's state, fed nothing but the events agui-state returned:
    STATE_SNAPSHOT replaces it, STATE_DELTA goes through python3-jsonpatch (which raises if an op does
    not fit). The tests compare it with getState after every call.

    It also holds the thread's activity messages (`activities`: messageId -> {activityType, content}),
    fed by `feed_activity` as @ag-ui/client applies the events: ACTIVITY_SNAPSHOT creates the activity
    or replaces its type and content, except that with `replace: false` an existing one is left as it is;
    ACTIVITY_DELTA patches the content with python3-jsonpatch and takes the event's activityType. The
    tests compare each activity with getActivity after every call."""

    def __init__(self, thread_id: str, state: Dict[str, Any]) -> None:
        self.tid, self.state, self.events = thread_id, copy.deepcopy(state), 0
        self.activities: Dict[str, Dict[str, Any]] = {}

    def feed(self, result: Dict[str, Any], opening: bool = False) -> Dict[str, Any]:
        events: List[Dict[str, Any]] = result["events"]
        delta = result["delta"]
        if not opening:  # elsewhere: events are [STATE_DELTA(delta)], or [] when nothing moved
            assert events == ([{"type": "STATE_DELTA", "delta": delta}] if delta else [])
        for ev in events:
            if ev["type"] == "STATE_SNAPSHOT":
                self.state = copy.deepcopy(ev["snapshot"])
            else:
                assert ev["type"] == "STATE_DELTA" and all(op["op"] != "test" for op in ev["delta"]), ev
                self.state = jsonpatch.apply_patch(self.state, ev["delta"])
            self.events += 1
        return result

    def check(self, got: Dict[str, Any]) -> None:
        """`got` is getState's result: the replayed copy must equal its state."""
        assert same(self.state, got["state"]), (
            f"replay differs from getState\n  replay:   {json.dumps(self.state)}\n"
            f"  getState: {json.dumps(got['state'])}")

    def feed_activity(self, result: Dict[str, Any], message_id: str) -> Dict[str, Any]:
        """Replays the events of one activity call (activity_snapshot, apply_activity_ops, diff_activity)
        on the activities, after checking that they have the wire shapes of protocol/README.md §10."""
        events: List[Dict[str, Any]] = result["events"]
        assert len(events) <= 1, events
        if "delta" in result:  # applyActivityOps, diffActivity: an ACTIVITY_DELTA whose patch is the delta
            assert not result["delta"] or events, "ops applied, but no event carries them"
            if events and events[0]["type"] == "ACTIVITY_DELTA":
                assert events[0]["patch"] == result["delta"], events
        else:  # activitySnapshot: the snapshot, always
            assert len(events) == 1 and events[0]["type"] == "ACTIVITY_SNAPSHOT", events
        for ev in events:
            assert ev["messageId"] == message_id, ev
            if ev["type"] == "ACTIVITY_SNAPSHOT":
                assert set(ev) - {"replace"} == {"type", "messageId", "activityType", "content"}, ev
                assert ev.get("replace", False) is False, "replace is present only when false"
                assert isinstance(ev["content"], dict), ev
                if ev.get("replace") is False and message_id in self.activities:
                    pass  # the client leaves an existing activity as it is
                else:
                    self.activities[message_id] = {"activityType": ev["activityType"],
                                                   "content": copy.deepcopy(ev["content"])}
            else:
                assert ev["type"] == "ACTIVITY_DELTA", ev
                assert set(ev) == {"type", "messageId", "activityType", "patch"}, ev
                assert all(op["op"] != "test" for op in ev["patch"]), ev
                # @ag-ui/client ignores a delta for an activity it does not hold: here that is a failure.
                assert message_id in self.activities, f"ACTIVITY_DELTA for {message_id!r}, which the client does not hold"
                held = self.activities[message_id]
                held["content"] = jsonpatch.apply_patch(held["content"], ev["patch"])
                assert isinstance(held["content"], dict), "the content stays an object"
                held["activityType"] = ev["activityType"]
            self.events += 1
        return result

    def check_activity(self, message_id: str, got: Dict[str, Any]) -> None:
        """`got` is getActivity's result: the replayed activity must equal its type and content."""
        replay = self.activities.get(message_id)
        held = {"activityType": got["activityType"], "content": got["content"]}
        assert replay is not None and same(replay, held), (
            f"replay of activity {message_id!r} differs from getActivity\n  replay:      {json.dumps(replay)}\n"
            f"  getActivity: {json.dumps(held)}")
