"""The stream edge's conformance table (test/fixtures/stream-edge/cases.json, read its "about" member: one
JSON table for the proxy and the three middleware) played against AguiStateMiddleware behind a real
uvicorn server, over a real socket: which requests are handled, which responses are repaired, which headers
are written, what reaches the app and what reaches the client. The middleware decides none of it (the
sidecar does), so every row must come out as the table says, here as in the proxy's, Go's and Clojure's
suites."""
from __future__ import annotations

import asyncio
import json
import re
import socket
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import uvicorn
from helpers import BIN, child_env

from agui_state import AsyncAguiState
from agui_state.asgi import AguiStateMiddleware

TABLE = json.loads((Path(__file__).resolve().parents[3] / "test/fixtures/stream-edge/cases.json").read_text("utf-8"))
Message = Dict[str, Any]
OPTION_NAMES = {"paths": "paths", "resume": "resume", "own": "own", "snapshots": "snapshots",
                "joinKeys": "join_keys", "store": "store", "detachGrace": "detach_grace", "sidecar": "sidecar"}


def plays(case: Dict[str, Any]) -> bool:
    return "python" in case.get("runners", ["python"])


def request_body(req: Dict[str, Any]) -> bytes:
    return str(req.get("body", "")).replace("@PAD@", "x" * int(req.get("pad", 0))).encode("utf-8")


class CaseApp:
    """The row's app: it reads the whole request, keeps it, and answers with the row's response (its head,
    then its body in one message and the end in another, as a streaming app does)."""

    def __init__(self, response: Dict[str, Any]) -> None:
        self.response = response
        self.calls = 0
        self.body: Optional[bytes] = None

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        self.calls += 1
        chunks: List[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        self.body = b"".join(chunks)
        headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in self.response.get("headers", [])]
        await send({"type": "http.response.start", "status": self.response.get("status", 200), "headers": headers})
        await send({"type": "http.response.body", "body": self.response.get("body", "").encode("utf-8"),
                    "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class Server:
    """One uvicorn server for the whole table, on an ephemeral port; each row's middleware serves in turn."""

    def __init__(self) -> None:
        self.app: Any = None
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(self.dispatch, log_level="warning", lifespan="off",
                                                    interface="asgi3", proxy_headers=False))
        self.server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self.task: Optional["asyncio.Future[None]"] = None

    async def dispatch(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    async def __aenter__(self) -> "Server":
        self.task = asyncio.ensure_future(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            assert not self.task.done(), self.task.result()
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.should_exit = True
        assert self.task is not None
        await self.task
        self.sock.close()

    async def request(self, req: Dict[str, Any]) -> Tuple[int, List[Tuple[str, str]], bytes]:
        """One HTTP/1.1 request with the row's method, path, headers and body (a Host and a Content-Length
        added, as every client adds them); the answer's status, header pairs and body (chunks joined)."""
        body = request_body(req)
        names = {n.lower() for n, _ in req.get("headers", [])}
        lines = [f"{req['method']} {req['path']} HTTP/1.1", f"host: 127.0.0.1:{self.port}"]
        lines += [f"{n}: {v}" for n, v in req.get("headers", [])]
        if "content-length" not in names and (body or req["method"] not in ("GET", "HEAD")):
            lines.append(f"content-length: {len(body)}")
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
            status_line = (await reader.readline()).decode("latin-1")
            status = int(status_line.split(" ")[1])
            headers: List[Tuple[str, str]] = []
            while (line := (await reader.readline()).decode("latin-1").rstrip("\r\n")):
                name, _, value = line.partition(":")
                headers.append((name.strip().lower(), value.strip()))
            return status, headers, await read_body(reader, status, req["method"], dict(headers))
        finally:
            writer.close()


async def read_body(reader: asyncio.StreamReader, status: int, method: str, headers: Dict[str, str]) -> bytes:
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks: List[bytes] = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readline()
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read()


def strip_ids(body: str) -> str:
    return re.sub(r"^id:[^\r\n]*(?:\r\n|\n|\r)", "", body, flags=re.M)


def middleware(case: Dict[str, Any], app: Any, sidecar: AsyncAguiState) -> AguiStateMiddleware:
    """The row's middleware: its options under their Python names; `sidecar` (true) gives the row's sidecar,
    and without it the row's sidecar is given too unless the row names the started sidecar's own flags."""
    options = {OPTION_NAMES[k]: v for k, v in case.get("options", {}).items()}
    if options.get("sidecar") or not ({"store", "detach_grace"} & options.keys()):
        options["sidecar"] = sidecar
    else:
        options.pop("sidecar", None)
    return AguiStateMiddleware(app, **options)


async def play(server: Server, case: Dict[str, Any]) -> List[str]:
    """One row on a fresh sidecar; what came out other than the row says (nothing: it passed)."""
    expect = case["expect"]
    async with AsyncAguiState(BIN, TABLE.get("sidecarArgs", []), env=child_env(), timeout=30) as sidecar:
        app = CaseApp(case.get("response", {}))
        if "error" in expect:
            try:
                middleware(case, app, sidecar)
            except ValueError as e:
                return [] if expect["error"] in str(e) else [f"the error {e!r} does not name {expect['error']}"]
            return [f"constructed, not refused with {expect['error']}"]
        server.app = middleware(case, app, sidecar)
        status, pairs, raw = await asyncio.wait_for(server.request(case["request"]), 60)  # a hang guard
    wrong: List[str] = []
    headers: Dict[str, str] = {}
    for name, value in pairs:
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if "app" in expect and (app.calls > 0) != expect["app"]:
        wrong.append(f"the app was {'' if app.calls else 'not '}called")
    if "status" in expect and status != expect["status"]:
        wrong.append(f"status {status}, not {expect['status']}")
    if expect.get("appBody") == "same" and app.body != request_body(case["request"]):
        wrong.append(f"the app got {len(app.body or b'')} bytes of body, not the {len(request_body(case['request']))} sent")
    if "body" in expect:
        body = raw.decode("utf-8", "replace")
        if expect.get("ids") == "strip":
            body = strip_ids(body)
        if body != expect["body"]:
            wrong.append(f"body {body!r}, not {expect['body']!r}")
    for name, value in expect.get("headers", {}).items():
        if headers.get(name.lower()) != value:
            wrong.append(f"header {name}: {headers.get(name.lower())!r}, not {value!r}")
    return wrong


async def test_every_python_row_of_the_stream_edge_table_passes_through_the_middleware() -> None:
    rows = [case for case in TABLE["cases"] if plays(case)]
    failed: Dict[str, List[str]] = {}
    played = 0
    async with Server() as server:
        for case in rows:
            wrong = await play(server, case)
            played += 1
            if wrong:
                failed[case["name"]] = wrong
    assert not failed, "\n".join(f"{name}: {'; '.join(w)}" for name, w in failed.items())
    # Every row that names no runners, or names python, was played: 29 when the table was written.
    assert played == len(rows) and played >= 29, f"played {played} of the table's {len(rows)} Python rows"
