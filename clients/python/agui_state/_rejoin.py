"""Resume in agui_state.asgi, the rejoin side (protocol/README.md §16): a request that comes back for a run,
answered from the sidecar's run log and never by the app. The sidecar decides everything (which request is a
rejoin or a reload, who may have the run, which headers and which refusal to answer with: one implementation
for the proxy and every middleware); this module only passes the request on and writes what comes back."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, MutableMapping, Optional, Tuple

from ._async import AsyncAguiState
from ._body import BodyTap
from ._errors import ResumeUnknownError, SidecarExitedError
from ._sidecar import SharedSidecar, log
from ._tasks import Tasks

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def header_pairs(headers: Any) -> List[List[str]]:
    """ASGI header pairs (bytes) as the protocol's [name, value] pairs, as the server gave them."""
    return [[n.decode("latin-1"), v.decode("latin-1")] for n, v in headers]


async def _call(sidecar: SharedSidecar, call: Callable[[AsyncAguiState], Awaitable[Any]], path: str, method: str,
                then: str) -> Tuple[Any, Any]:
    """(client, result) of one `method` call; a sidecar found dead is started again once (on Redis, the new one
    serves the run), and the error of the second try goes up. ResumeUnknownError goes up at once; so does a
    timeout, once the hung sidecar is ended with one line (`then`: what becomes of the request)."""
    for attempt in (1, 2):
        generation = sidecar.generation
        try:
            client = await sidecar.get()
            generation = sidecar.generation
            return client, await call(client)
        except asyncio.TimeoutError:
            sidecar.hung(generation, path, method, then)
            raise
        except SidecarExitedError as e:
            sidecar.died(generation, e)
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def target(scope: Scope) -> str:
    """The request's path with its query, as the client sent it (raw_path where the server gives it)."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) and raw else scope.get("path", "")
    query = scope.get("query_string") or b""
    return f"{path}?{query.decode('latin-1')}" if query else path


async def classify(sidecar: SharedSidecar, scope: Scope, paths: Optional[List[str]],
                   resume: bool) -> Optional[Dict[str, Any]]:
    """classifyRequest's reply for this request (protocol/README.md §16): whether it is handled, its kind
    ("forward": the app's; "rejoin" or "reload") and how much of its body to keep. None when the sidecar
    cannot answer: the request goes to the app untouched (fail open), with one line."""
    path = scope.get("path", "")
    request = (scope.get("method", "GET"), target(scope), header_pairs(scope.get("headers", ())))
    try:
        _, got = await _call(sidecar, lambda c: c.classify_request(*request, paths=paths,
                                                                   resume=None if resume else False),
                             path, "classifyRequest", "the request goes to the app")
        return dict(got)
    except asyncio.TimeoutError:
        return None  # said by hung()
    except Exception as e:  # noqa: BLE001 - fail open
        log.warning("%s: the request could not be classified (%s: %s); it goes to the app untouched",
                    path, type(e).__name__, e)
        return None


async def _body(receive: Receive, limit: int) -> Optional[str]:
    """The request body as text, read to its end but kept only within `limit` (classifyRequest's bodyBytes);
    None past it, or cut off: the sidecar then refuses the rejoin as it would any it cannot place."""
    tap = BodyTap(limit)
    while not tap.ended.is_set():
        tap.take(await receive())
    return await tap.text()


async def _answer(send: Send, status: int, headers: Dict[str, str], body: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]})
    await send({"type": "http.response.body", "body": body.encode("utf-8"), "more_body": False})


async def rejoin(sidecar: SharedSidecar, scope: Scope, receive: Receive, send: Send, kind: str,
                 body_bytes: int) -> None:
    """Answers a rejoin or a reload (`kind`, classifyRequest's) from the sidecar's run log: rejoinStream with
    the request as received, then its status, headers and readRejoin's text; a refusal is written exactly as
    the sidecar gives it. A sidecar that cannot be reached: 410 (204 for a reload) with an empty body, so that
    the client starts a new run (fail open)."""
    path = scope.get("path", "")
    refused = 204 if kind == "reload" else 410  # a sidecar that cannot be reached: the client starts a new run
    request: Dict[str, Any] = {"method": scope.get("method", "POST"), "path": target(scope),
                               "headers": header_pairs(scope.get("headers", ()))}
    body = await _body(receive, body_bytes)
    if body is not None:
        request["body"] = body
    try:
        client, opened = await _call(sidecar, lambda c: c.rejoin_stream(request=request), path, "rejoinStream",
                                     f"the {kind} is answered {refused}")
    except ResumeUnknownError as e:
        await _answer(send, e.status, e.headers, e.body)
        return
    except Exception as e:  # noqa: BLE001 - fail open
        if not isinstance(e, asyncio.TimeoutError):  # hung() said it
            log.warning("%s: the %s could not be served (%s: %s); answered %d", path, kind, type(e).__name__, e,
                        refused)
        await _answer(send, refused, {}, "")
        return
    read_id = opened["readId"]
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in opened["headers"].items()]
    tasks = Tasks()  # the watch for the client's leaving and each read, cancelled and awaited on the way out
    left = tasks.start(_disconnect(receive))
    try:
        await send({"type": "http.response.start", "status": opened["status"], "headers": headers})
        end = await _stream(client, read_id, send, left, tasks)
    except OSError as e:  # a server that raises on a send to a client that left (uvicorn's ClientDisconnected)
        end = logging.INFO, f"the client left ({type(e).__name__})"
        await tasks.close()
        await _close(client, read_id)
    finally:
        await tasks.close()
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


async def _stream(client: Any, read_id: str, send: Send, left: "asyncio.Future[Any]",
                  tasks: Tasks) -> Optional[Tuple[int, str]]:
    """readRejoin's text to the client until the run ends, one page at a time: each is written, and the next
    asked for once the server took it (its send returns), so a slow client holds one page here at most.
    No wait is passed: the sidecar's default decides (§16). Returns None when the run finished and the
    response was ended; else the log level and why it was cut short (the run did not finish, the client
    left, or the sidecar failed mid-read)."""
    while True:
        reading = tasks.start(client.read_rejoin(read_id))
        await asyncio.wait({reading, left}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():  # the client left: the read is dropped and forgotten, and no longer keeps the run
            await tasks.close()
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
