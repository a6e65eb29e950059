"""The resume edge's conformance table (test/fixtures/resume-edge/cases.json, read its "format" member) played
against AguiStateMiddleware: the fixture's app behind the middleware, resume on, the default credential
policy, a fresh real sidecar ($AGUI_STATE_BIN) for every case. The proxy's tests and the Go and Clojure
middleware suites play the same table, so that no edge of resume can drift between them (issue 38 item 7):
the middleware decides nothing, the sidecar decides all (classifyRequest, rejoinStream, openStream's
`resume`), and every case must come out as the table says."""
from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from helpers import BIN, child_env

from agui_state import AsyncAguiState
from agui_state.asgi import AguiStateMiddleware

TABLE = json.loads((Path(__file__).resolve().parents[3] / "test/fixtures/resume-edge/cases.json").read_text("utf-8"))
Message = Dict[str, Any]


class FixtureApp:
    """The table's `app`: its status, headers and events (as SSE) for every request that reaches it, the
    request read first. `calls` counts them."""

    def __init__(self, app: Dict[str, Any]) -> None:
        self.status = app["status"]
        self.headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in app["headers"]]
        self.events = [f"data: {json.dumps(e, separators=(',', ':'))}\n\n".encode() for e in app["events"]]
        self.calls = 0

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        for event in self.events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def play(mw: Any, req: Dict[str, Any]) -> List[Message]:
    """One request as an ASGI server delivers it (header names lower case, the body as one message, then
    nothing until the answer is done); the messages the middleware sent."""
    body = b"" if "body" not in req else json.dumps(req["body"], separators=(",", ":")).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": req["method"],
             "path": req["path"], "raw_path": req["path"].encode(), "query_string": b"",
             "headers": [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in req["headers"]]}
    inbox: List[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    sent: List[Message] = []
    never = asyncio.Event()

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await asyncio.wait_for(mw(scope, receive, send), 60)  # a hang guard
    return sent


def answer(sent: List[Message]) -> Tuple[int, Dict[str, str], str, bool]:
    """Status, headers (lower-case names, repeats joined), body, and whether the response was ended."""
    assert sent and sent[0]["type"] == "http.response.start", sent
    headers: Dict[str, str] = {}
    for n, v in sent[0].get("headers", ()):
        name, value = n.decode("latin-1").lower(), v.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    body = b"".join(m.get("body", b"") for m in sent[1:]).decode("utf-8")
    ended = sent[-1]["type"] == "http.response.body" and not sent[-1].get("more_body", False)
    return sent[0]["status"], headers, body, ended


def blocks(body: str) -> List[str]:
    return [b for b in re.split(r"\r\n\r\n|\n\n|\r\r", body) if b.strip()]


def data_blocks(body: str) -> List[str]:
    return [b for b in blocks(body) if re.search(r"^data:", b, re.M)]


def event_type(block: str) -> str:
    data = "\n".join(re.sub(r"^data: ?", "", line) for line in block.splitlines() if line.startswith("data:"))
    return str(json.loads(data)["type"])


def ids_in(body: str) -> List[str]:
    return re.findall(r"^id: ?(.*)$", body, re.M)


def forged(opening: str) -> str:
    """The opening id with the last character of its nonce changed."""
    return opening[:-1] + ("A" if opening[-1] != "A" else "B")


def substitute(req: Dict[str, Any], opening: Optional[str], last: Optional[str]) -> Dict[str, Any]:
    names = {"$opening": opening, "$last": last, "$forged": None if opening is None else forged(opening)}

    def value(v: str) -> str:
        if v in names:
            assert names[v] is not None, f"{v} without a start whose answer has ids"
            return str(names[v])
        return v

    return {**req, "headers": [[n, value(v)] for n, v in req["headers"]]}


async def run_case(case: Dict[str, Any]) -> List[str]:
    """Plays one case on a fresh sidecar; what came out other than the table says (nothing: it passed)."""
    wrong: List[str] = []
    app = FixtureApp(TABLE["app"])
    async with AsyncAguiState(BIN, env=child_env(), timeout=30) as s:
        mw = AguiStateMiddleware(app, sidecar=s)
        opening = last = None
        if "start" in case:
            status, headers, body, ended = answer(await play(mw, case["start"]))
            ids = ids_in(body)
            # Every start is a posted run answered with events: filed, so it has ids and says so (§16).
            if status != 200 or not ended or not ids or headers.get("ag-ui-resumable") != "true":
                return [f"the start's answer: {status}, ended {ended}, ids {ids}, headers {headers}"]
            opening, last = ids[0], ids[-1]
        before = app.calls
        status, headers, body, ended = answer(await play(mw, substitute(case["request"], opening, last)))
        expect = case["expect"]
        if status != expect["status"]:
            wrong.append(f"status {status}, not {expect['status']}")
        if (app.calls > before) != expect["app"]:
            wrong.append(f"the app was {'' if app.calls > before else 'not '}called")
        if "events" in expect:
            types = [event_type(b) for b in data_blocks(body)]
            if types != expect["events"]:
                wrong.append(f"events {types}, not {expect['events']}")
            if not ended:
                wrong.append("the answer was not ended")
        if expect.get("ids") and not all(b.lstrip().startswith("id:") for b in data_blocks(body)):
            wrong.append(f"a data block without an id line: {body!r}")
        for name, value in expect.get("headers", {}).items():
            if headers.get(name) != value:
                wrong.append(f"header {name}: {headers.get(name)!r}, not {value!r}")
        for name in expect.get("absent", []):
            if name in headers:
                wrong.append(f"header {name} present: {headers[name]!r}")
        if "body" in expect:
            want = TABLE["gone"]["body"] if expect["body"] == "$gone" else expect["body"]
            if body != want:
                wrong.append(f"body {body!r}, not {want!r}")
            if expect["body"] == "$gone":
                for name, value in TABLE["gone"]["headers"].items():
                    if headers.get(name) != value:
                        wrong.append(f"gone's header {name}: {headers.get(name)!r}, not {value!r}")
    return wrong


async def test_every_case_of_the_resume_edge_table_passes_through_the_middleware() -> None:
    cases = TABLE["cases"]
    assert len(cases) >= 19, "the table has its 19 cases at least"
    failed = {}
    for case in cases:
        wrong = await run_case(case)
        if wrong:
            failed[case["name"]] = wrong
    assert not failed, "\n".join(f"{name}: {'; '.join(w)}" for name, w in failed.items())
