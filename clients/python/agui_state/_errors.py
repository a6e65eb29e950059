"""The exceptions, one per error code of protocol/README.md §8, shared by both clients."""
from __future__ import annotations

import json
import signal
from typing import Any, Dict, Mapping, Optional, Type

from ._common import python_names


class AguiStateError(Exception):
    """An error reply: `.code` (the JSON-RPC code), `.message`, `.data` (a dict, or None)."""

    def __init__(self, code: Optional[int], message: str, data: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message if code is None else f"{message} [{code}] {json.dumps(data)}")
        self.code, self.message, self.data = code, message, data


class UnknownThreadError(AguiStateError):
    """-32001: the thread was never opened, was closed or evicted (`data["reason"]`). Call open_run again."""


class PatchFailedError(AguiStateError):
    """-32002: an atomic apply_ops failed; nothing changed. `data` is {code: <skip code>, index, message}."""


class LimitExceededError(AguiStateError):
    """-32003: a limit was exceeded; nothing changed. `data` is {code, limit, max, actual}."""


class VersionConflictError(AguiStateError):
    """-32004: `if_version` did not match; nothing changed. `data` is {code, expected, actual}."""


class UnknownActivityError(AguiStateError):
    """-32005: the thread holds no activity `data["messageId"]` (never created, or lost with a restarted
    sidecar). `data` is {code, threadId, messageId}. diff_activity (with activity_type) or
    activity_snapshot creates it again, with an ACTIVITY_SNAPSHOT for the client."""


class UnknownStreamError(AguiStateError):
    """-32006: the stream id names no open stream (`data["reason"]`: never opened, closed, evicted or
    idle). `data` is {code, streamId, reason}. Nothing resumes it: send the rest of the response as it is."""


class ResumeUnknownError(AguiStateError):
    """-32007: nothing to rejoin (an unknown, expired, forged or refused id, another thread, path or
    credentials, a thread with no run): one answer for every reason (protocol/README.md §16). `data` is
    {code, status, headers, body}: the answer to write, exactly (`.status`, `.headers`, `.body`): 410 with
    a JSON body for a rejoin, 204 empty for a reload."""

    @property
    def status(self) -> int:
        status = (self.data or {}).get("status")
        return status if isinstance(status, int) else 410

    @property
    def headers(self) -> Dict[str, str]:
        headers = (self.data or {}).get("headers")
        return {str(k): str(v) for k, v in headers.items()} if isinstance(headers, dict) else {}

    @property
    def body(self) -> str:
        body = (self.data or {}).get("body")
        return body if isinstance(body, str) else ""


class UnknownReadError(AguiStateError):
    """-32008: no open read has the id (`data["reason"]`: never opened, closed, evicted or idle). `data` is
    {code, readId, reason}. Break the rejoin's response off."""


class InvalidParamsError(AguiStateError):
    """-32602: `data` is {code: "INVALID_PARAMS", field: <pointer into params>, reason}."""


class SidecarExitedError(AguiStateError):
    """The sidecar process is gone. `.returncode` is its exit status (negative: killed by a signal); None when it
    is not known: the sidecar closed its stdout, or the connection to a shared sidecar (`address`) broke."""

    def __init__(self, returncode: Optional[int], closed: bool = False, address: Optional[str] = None) -> None:
        text = f"agui-state exited with status {returncode}"
        if address is not None:
            text = f"the connection to the agui-state sidecar at {address} closed"
        elif returncode is None:
            text = "agui-state closed its stdout"
        elif returncode < 0:
            sig = -returncode
            text += f" (signal {signal.Signals(sig).name if sig in signal.valid_signals() else sig})"
        super().__init__(None, text + (" after close()" if closed else ""), {"returncode": returncode})
        self.returncode = returncode


class SidecarUnreachableError(AguiStateError):
    """No shared sidecar answers at `.address` (protocol/README.md §2, "One sidecar per host"): nobody listens
    there, or in start mode the sidecar started there did not come to answer. `.reason` says which."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(None, f"no agui-state sidecar at {address}: {reason}", {"address": address})
        self.address, self.reason = address, reason


_BY_CODE: Dict[int, Type[AguiStateError]] = {
    -32001: UnknownThreadError, -32002: PatchFailedError, -32003: LimitExceededError,
    -32004: VersionConflictError, -32005: UnknownActivityError, -32006: UnknownStreamError,
    -32007: ResumeUnknownError, -32008: UnknownReadError,
    -32602: InvalidParamsError,
}


def error_from_reply(err: Mapping[str, Any]) -> AguiStateError:
    """The exception for a reply's `error` member: the subclass for its code, else AguiStateError."""
    code = err.get("code")
    cls: Type[AguiStateError] = _BY_CODE.get(code, AguiStateError) if isinstance(code, int) else AguiStateError
    data = err.get("data")
    # The message is the sidecar's, with the methods it names as the Python methods (open_run, not openRun).
    return cls(code if isinstance(code, int) else None, python_names(str(err.get("message", ""))),
               data if isinstance(data, dict) else None)
