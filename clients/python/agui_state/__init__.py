"""Clients for the agui-state sidecar (JSON-RPC 2.0 over stdio, or over a connection to the host's shared
sidecar): `AguiState` blocks and is safe to share across threads; `AsyncAguiState` is awaited and never blocks
the event loop. Standard library only."""
from ._async import AsyncAguiState
from ._common import find_binary
from ._errors import (
    AguiStateError, InvalidParamsError, LimitExceededError, PatchFailedError, SidecarExitedError,
    ResumeUnknownError, SidecarUnreachableError, UnknownActivityError, UnknownReadError, UnknownStreamError, UnknownThreadError,
    VersionConflictError,
)
from ._sync import AguiState

try:  # written by scripts/build-wheel.mjs from package.json; absent in the source tree
    from ._version import __version__  # type: ignore[import]
except ImportError:  # pragma: no cover
    __version__ = "0+source"

__all__ = ["AguiState", "AsyncAguiState", "AguiStateError", "UnknownThreadError", "PatchFailedError",
           "LimitExceededError", "VersionConflictError", "UnknownActivityError", "UnknownStreamError",
           "InvalidParamsError", "ResumeUnknownError", "UnknownReadError",
           "SidecarExitedError", "SidecarUnreachableError", "find_binary", "__version__"]
