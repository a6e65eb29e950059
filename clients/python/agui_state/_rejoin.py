"""Resume in agui_state.asgi, the rejoin side (protocol/README.md §16): a request that comes back
for a run, answered from the sidecar's run log and never by the app. The sidecar holds the runs (one
implementation for the proxy and every middleware); this module only recognises a rejoin and streams
what the sidecar hands back."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Tuple

from ._errors import ResumeUnknownError, SidecarExitedError
from ._sidecar import SharedSidecar, log

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# readRejoin's waitMs: how long one call waits for an event. A client that leaves is seen at once regardless.
_WAIT_MS = 10_000
# A refused rejoin's body, the proxy's (src/proxy/resume.ts): a refusal and an unknown run get the same answer.
GONE = json.dumps({"error": {"code": "resume_unknown", "message": "no run to resume from this Last-Event-ID: it "
                             "is unknown, expired, or not yours; start a new run"}}, separators=(",", ":")).encode()
# Response headers not filed with a run: a rejoin is answered with the others again, as the proxy does.
_NOT_FILED = {"set-cookie", "content-length", "content-encoding", "connection", "keep-alive", "transfer-encoding"}


def header(scope: Scope, name: bytes) -> Optional[str]:
    """A request header (several joined as HTTP joins them: cookies with "; "), or None."""
    found = [v.decode("latin-1") for n, v in scope.get("headers", ()) if n.lower() == name]
    if not found:
        return None
    return ("; " if name == b"cookie" else ", ").join(found)


def credentials(scope: Scope) -> Dict[str, str]:
    """The request's Authorization and Cookie, as resume's and rejoinStream's params (the sidecar keeps only
    their keyed hash)."""
    found = {"authorization": header(scope, b"authorization"), "cookie": header(scope, b"cookie")}
    return {k: v for k, v in found.items() if v is not None}


def filed_headers(headers: List[Tuple[bytes, bytes]]) -> Dict[str, str]:
    """The response's headers as openStream's resume.headers: what a rejoin is answered with again."""
    out: Dict[str, str] = {}
    for name, value in headers:
        key = name.decode("latin-1").lower()
        if key not in _NOT_FILED:
            text = value.decode("latin-1")
            out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def rejoin_of(scope: Scope, handles: Callable[[str], bool]) -> Optional[Tuple[str, Optional[str]]]:
    """(agent path, Last-Event-ID or None) when the request comes back for a run: a POST with Last-Event-ID to
    a handled path (a dropped stream), or a POST to <path>/connect of one (a reloaded page). Only POST: AG-UI
    runs are posted, and an EventSource endpoint of the app's own (a GET that reconnects with Last-Event-ID)
    is left to the app."""
    if scope.get("method") != "POST":
        return None
    path = scope.get("path", "")
    last = header(scope, b"last-event-id")
    if last and handles(path):
        return path, last
    if path.endswith("/connect"):
        agent = path[:-len("/connect")] or "/"
        if handles(agent):
            return agent, None
    return None


async def _body(receive: Receive) -> bytes:
    chunks: List[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _thread_id(body: bytes) -> Optional[str]:
    try:
        run_input = json.loads(body)
    except ValueError:
        return None
    thread_id = run_input.get("threadId") if isinstance(run_input, dict) else None
    return thread_id if isinstance(thread_id, str) else None


async def refuse(send: Send, status: int) -> None:
    """Nothing to rejoin: 410 with the proxy's body, or 204 empty for a reload."""
    headers = [] if status == 204 else [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if status == 204 else GONE, "more_body": False})


async def rejoin(sidecar: SharedSidecar, scope: Scope, receive: Receive, send: Send, path: str,
                 last_event_id: Optional[str]) -> None:
    """Answers a rejoin (`last_event_id`) or a reload (None) from the sidecar's run log. Nothing to rejoin is
    410 (204 for a reload), as from the proxy; so is a sidecar that cannot be reached (fail open: the client
    starts a new run)."""
    refused = 410 if last_event_id else 204
    thread_id = _thread_id(await _body(receive))
    if thread_id is None:
        await refuse(send, refused)
        return
    params = dict(credentials(scope), last_event_id=last_event_id)
    opened: Optional[Dict[str, Any]] = None
    client: Any = None
    for attempt in (1, 2):  # a sidecar found dead is started again once: on Redis, the new one serves the run
        generation = sidecar.generation
        try:
            client = await sidecar.get()
            generation = sidecar.generation
            opened = await client.rejoin_stream(thread_id, path, **params)
            break
        except ResumeUnknownError as e:
            await refuse(send, e.status)
            return
        except SidecarExitedError as e:
            sidecar.died(generation, e)
            if attempt == 2:
                log.warning("%s: the rejoin could not be served (%s); answered %d", path, e, refused)
        except Exception as e:  # noqa: BLE001 - fail open
            log.warning("%s: the rejoin could not be served (%s: %s); answered %d", path, type(e).__name__, e,
                        refused)
            break
    if opened is None:
        await refuse(send, refused)
        return
    read_id = opened["readId"]
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in opened["headers"].items()]
    left = asyncio.ensure_future(_disconnect(receive))
    try:
        await send({"type": "http.response.start", "status": opened["status"], "headers": headers})
        end = await _stream(client, read_id, send, left)
    except OSError as e:  # a server that raises on a send to a client that left (uvicorn's ClientDisconnected)
        end = logging.INFO, f"the client left ({type(e).__name__})"
        await _close(client, read_id)
    finally:
        left.cancel()
    # One line, and no exception: how the answer ended is the run's doing or the client's, not a fault of the
    # app or the server. An answer cut short is left without its end (ASGI has no other way to break a response
    # off): the server closes the connection, and the client sees a failed body, as from the proxy (§16).
    if end is not None:
        log.log(end[0], "%s: the rejoin's answer ended early: %s", path, end[1])


async def _disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _close(client: Any, read_id: str) -> None:
    """closeRejoin: the read is forgotten, and no longer keeps the run going."""
    try:
        await client.close_rejoin(read_id)
    except Exception as e:  # noqa: BLE001 - an idle limit holds on the sidecar
        log.debug("closeRejoin %s: %s", read_id, e)


async def _stream(client: Any, read_id: str, send: Send,
                  left: "asyncio.Future[None]") -> Optional[Tuple[int, str]]:
    """readRejoin's text to the client until the run ends. Returns None when the run finished and the response
    was ended; else the log level and why it was cut short (the run did not finish, the client left, or the
    sidecar failed mid-read)."""
    while True:
        reading = asyncio.ensure_future(client.read_rejoin(read_id, wait_ms=_WAIT_MS))
        await asyncio.wait({reading, left}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():  # the client left: the read is forgotten, and no longer keeps the run
            reading.add_done_callback(lambda t: t.cancelled() or t.exception())
            await _close(client, read_id)
            return logging.INFO, "the client left"
        try:
            got = reading.result()
        except Exception as e:  # noqa: BLE001 - the sidecar failed mid-read: break the response off
            return logging.WARNING, f"readRejoin failed ({type(e).__name__}: {e})"
        done = bool(got["done"])
        finished = done and got.get("end") == "finished"
        if got["text"] or finished:
            await send({"type": "http.response.body", "body": got["text"].encode("utf-8"),
                        "more_body": not finished})
        if done:
            # WARNING: a user's client lost its run. (uvicorn adds its own line for the answer left unended.)
            return None if finished else (logging.WARNING, f"the run ended {got.get('end')}")
