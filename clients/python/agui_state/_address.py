"""Where a shared sidecar listens (protocol/README.md §2, "One sidecar per host"): the text of the `sidecar`
option or of AGUI_STATE_SIDECAR read once, when a client or the middleware is made, so that a bad address is
a ValueError there and never a failure of the first request. The rules are `serve --listen`'s, so that one
spelling works for the sidecar and every client."""
from __future__ import annotations

import os
import re
from typing import Mapping, NamedTuple, Optional, Sequence

ENV_ADDRESS = "AGUI_STATE_SIDECAR"
ENV_START = "AGUI_STATE_SIDECAR_START"

# sun_path holds 108 bytes on Linux and 104 on macOS and the BSDs, a terminating NUL included.
_MAX_SOCKET_PATH_BYTES = 103
_TCP = re.compile(r"^(?:\[([0-9A-Fa-f:.]+)\]|([^:\[\]\s]+)):(\d{1,5})$")
_LOOPBACK_V4 = re.compile(r"^(::ffff:)?127(\.\d{1,3}){3}$", re.I)


class Address(NamedTuple):
    """A parsed address: `kind` "unix" (`path`) or "tcp" (`host`, `port`); `text` as the option names it."""
    kind: str
    text: str
    path: str = ""
    host: str = ""
    port: int = 0


class Shared(NamedTuple):
    """The shared sidecar a client uses: its address, and whether a client that finds nobody there starts it."""
    address: Address
    start: bool


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or bool(_LOOPBACK_V4.match(host))


def parse_address(text: str, what: str = "sidecar") -> Address:
    """`unix:PATH` or `tcp:HOST:PORT` (HOST a loopback address, `[::1]` for IPv6); ValueError naming `what`
    (the option or the variable) and the problem."""
    def bad(problem: str) -> ValueError:
        return ValueError(f"{what}: {problem}")

    if not isinstance(text, str):
        raise TypeError(f"{what}: expected an address such as 'unix:/run/agui-state/sidecar.sock', not {text!r}")
    if text.startswith("unix:"):
        path = text[len("unix:"):]
        if not path:
            raise bad("unix: needs a path, such as unix:/run/agui-state/sidecar.sock")
        if "\0" in path:
            raise bad("a socket path cannot hold a NUL character")
        size = len(path.encode("utf-8", "surrogateescape"))
        if size > _MAX_SOCKET_PATH_BYTES:
            raise bad(f"the socket path is {size} bytes, over the {_MAX_SOCKET_PATH_BYTES} a Unix socket's name "
                      "can hold; pick a shorter one")
        return Address("unix", text, path=path)
    if text.startswith("tcp:"):
        m = _TCP.match(text[len("tcp:"):])
        port = int(m.group(3)) if m else -1
        if not m or not 0 < port <= 65535:
            raise bad(f"expected tcp:HOST:PORT with a port from 1 to 65535 (the port the sidecar listens on), "
                      f"got {text!r}")
        host = m.group(1) or m.group(2)
        # The sidecar serves every thread's state and every run's events: it listens on this host only, and a
        # client is never pointed beyond it.
        if not _loopback(host):
            raise bad(f"{host} is not a loopback address; the sidecar listens on this host only (use unix:PATH, "
                      "or 127.0.0.1)")
        return Address("tcp", text, host=host, port=port)
    raise bad(f"expected unix:PATH or tcp:HOST:PORT, got {text!r}")


def unstarted(who: str, options: Sequence[str], address: Address) -> ValueError:
    """The error for sidecar flags (`options`, as the caller names them) given with an address and no start mode
    (protocol/README.md §2, "One sidecar per host"): they are flags of a sidecar this client starts, and here it
    starts none, so they could reach no sidecar. Refused when the client is made, as a bad address is."""
    one = len(options) == 1
    return ValueError(f"{who}: CONFLICTING_OPTIONS: {' and '.join(options)} {'gives' if one else 'give'} the flags of "
                      f"a sidecar this client starts, but with an address ({address.text}) and no start mode no "
                      f"sidecar is started here; drop {'it' if one else 'them'}, or set start mode (sidecar_start, "
                      f"or {ENV_START}=1)")


def _start_flag(value: Optional[str]) -> bool:
    if value in (None, "", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"{ENV_START} must be 1 (start the shared sidecar when nobody answers) or 0, not {value!r}")


def resolve(option: Optional[str], start: Optional[bool], who: str,
            environ: Optional[Mapping[str, str]] = None) -> Optional[Shared]:
    """The shared sidecar for `who` (the class, for the error): the `option`'s address, else
    AGUI_STATE_SIDECAR's; `start` (sidecar_start), else AGUI_STATE_SIDECAR_START. None: neither names an
    address, and the client spawns a sidecar of its own, as it always did. ValueError for a bad address, a
    bad AGUI_STATE_SIDECAR_START, or start mode with no address to start at."""
    env = os.environ if environ is None else environ
    if option is not None:
        address: Optional[Address] = parse_address(option, f"{who}: sidecar")
    else:
        text = env.get(ENV_ADDRESS) or ""
        address = parse_address(text, f"{who}: {ENV_ADDRESS}") if text else None
    starting = _start_flag(env.get(ENV_START)) if start is None else bool(start)
    if address is None:
        if starting:
            raise ValueError(f"{who}: {'sidecar_start' if start else ENV_START + '=1'} needs the address to start the "
                             f"shared sidecar at: the sidecar option or {ENV_ADDRESS}")
        return None
    return Shared(address, starting)
