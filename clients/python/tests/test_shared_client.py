"""Both clients with the host's shared sidecar (protocol/README.md §2, "One sidecar per host"): the address in
the `sidecar` option or AGUI_STATE_SIDECAR (the option wins), checked when the client is made; the real
`agui-state serve --listen` shared by several clients; a broken connection failing calls as a dead sidecar
does, and restart() connecting again; start mode starting one detached sidecar, however many start at once."""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest
from helpers import BIN, child_env
from shared_host import WAIT, Serve, cmdline, serving, sock, until  # noqa: F401 - sock is a fixture

from agui_state import AguiState, AsyncAguiState, SidecarExitedError, SidecarUnreachableError
from agui_state.asgi import AguiStateMiddleware


async def _app(scope: Any, receive: Any, send: Any) -> None:
    pass


@pytest.fixture(autouse=True)
def no_sidecar_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGUI_STATE_SIDECAR", raising=False)
    monkeypatch.delenv("AGUI_STATE_SIDECAR_START", raising=False)


BAD = {
    "udp:127.0.0.1:9": "expected unix:PATH or tcp:HOST:PORT, got 'udp:127.0.0.1:9'",
    "/run/s.sock": "expected unix:PATH or tcp:HOST:PORT",
    "unix:": "unix: needs a path",
    "unix:/" + "x" * 103: "the socket path is 104 bytes, over the 103",
    "tcp:10.0.0.1:80": "10.0.0.1 is not a loopback address",
    "tcp:127.0.0.1:0": "a port from 1 to 65535",
    "tcp:127.0.0.1": "expected tcp:HOST:PORT",
}


def test_a_bad_address_is_a_value_error_when_the_client_or_the_middleware_is_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    makers = {"AguiState": lambda **kw: AguiState(BIN, **kw), "AsyncAguiState": lambda **kw: AsyncAguiState(BIN, **kw),
              "AguiStateMiddleware": lambda **kw: AguiStateMiddleware(_app, **kw)}
    for text, problem in BAD.items():
        for who, make in makers.items():
            with pytest.raises(ValueError) as e:
                make(sidecar=text)
            assert str(e.value).startswith(f"{who}: sidecar: ") and problem in str(e.value), str(e.value)
            monkeypatch.setenv("AGUI_STATE_SIDECAR", text)
            with pytest.raises(ValueError) as e:
                make()
            assert str(e.value).startswith(f"{who}: AGUI_STATE_SIDECAR: ") and problem in str(e.value), str(e.value)
            monkeypatch.delenv("AGUI_STATE_SIDECAR")
    monkeypatch.setenv("AGUI_STATE_SIDECAR_START", "yes")
    with pytest.raises(ValueError, match="AGUI_STATE_SIDECAR_START must be 1"):
        AsyncAguiState(BIN, sidecar="unix:/tmp/x.sock")
    monkeypatch.setenv("AGUI_STATE_SIDECAR_START", "1")
    with pytest.raises(ValueError, match=r"AGUI_STATE_SIDECAR_START=1 needs the address"):
        AsyncAguiState(BIN)
    with pytest.raises(ValueError, match="sidecar_start needs the address"):
        AguiStateMiddleware(_app, sidecar_start=True)


UNSTARTED = ("the flags of a sidecar this client starts, but with an address (unix:{}) and no start mode no "
             "sidecar is started here; drop {}, or set start mode (sidecar_start, or AGUI_STATE_SIDECAR_START=1)")


def test_flags_only_for_a_sidecar_the_client_starts(sock: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for make in (AguiState, AsyncAguiState):
        with pytest.raises(ValueError) as e:
            make(BIN, args=["--max-ops", "9"], sidecar=f"unix:{sock}")
        assert str(e.value) == (f"{make.__name__}: CONFLICTING_OPTIONS: args ['--max-ops', '9'] gives "
                                + UNSTARTED.format(sock, "it"))
    with pytest.raises(ValueError) as e:
        AguiStateMiddleware(_app, sidecar=f"unix:{sock}", store="memory")
    assert str(e.value) == "AguiStateMiddleware: CONFLICTING_OPTIONS: store gives " + UNSTARTED.format(sock, "it")
    monkeypatch.setenv("AGUI_STATE_SIDECAR", f"unix:{sock}")  # the environment's address counts as the option's
    with pytest.raises(ValueError) as e:
        AguiStateMiddleware(_app, store="memory", detach_grace=0)
    assert str(e.value) == ("AguiStateMiddleware: CONFLICTING_OPTIONS: store and detach_grace give "
                            + UNSTARTED.format(sock, "them"))
    monkeypatch.setenv("AGUI_STATE_SIDECAR_START", "1")  # start mode from the environment: they are its flags
    assert AguiStateMiddleware(_app, store="memory", detach_grace=0).sidecar is not None
    monkeypatch.delenv("AGUI_STATE_SIDECAR")
    monkeypatch.delenv("AGUI_STATE_SIDECAR_START")
    with pytest.raises(ValueError, match="CONFLICTING_OPTIONS: sidecar_start"):
        AguiStateMiddleware(_app, sidecar=AsyncAguiState(BIN), sidecar_start=True)
    # In start mode they are the started sidecar's flags; a connecting client needs no binary at all.
    assert AsyncAguiState(BIN, args=["--max-ops", "9"], sidecar=f"unix:{sock}", sidecar_start=True).argv == [
        BIN, "serve", "--listen", f"unix:{sock}", "--exit-idle", "60000", "--max-ops", "9"]
    assert AsyncAguiState("/no/such/binary", sidecar=f"unix:{sock}").address == f"unix:{sock}"


def test_the_option_wins_and_without_either_the_client_spawns_its_own(sock: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    serve = Serve(f"unix:{sock}")
    monkeypatch.setenv("AGUI_STATE_SIDECAR", "udp:nowhere")
    with AguiState(BIN, sidecar=f"unix:{sock}", timeout=30) as s:
        assert (s.address, s.pid) == (f"unix:{sock}", serve.pid)
    monkeypatch.setenv("AGUI_STATE_SIDECAR", f"unix:{sock}")
    with AguiState(BIN, timeout=30) as s:
        assert s.pid == serve.pid
    monkeypatch.delenv("AGUI_STATE_SIDECAR")
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        assert s.address is None and s.pid != serve.pid
        with open(f"/proc/{s.pid}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == os.getpid(), "a child of this process, as before"


async def test_clients_of_one_shared_sidecar_share_its_threads_and_closing_one_leaves_it_serving(sock: str) -> None:
    serve = Serve(f"unix:{sock}")
    address = f"unix:{sock}"
    with AguiState(sidecar=address, timeout=30) as sync:
        sync.open_run("t1", state={"a": 1})
        async with AsyncAguiState(sidecar=address, timeout=30) as s:
            assert s.pid == serve.pid
            assert (await s.apply_ops("t1", [{"op": "add", "path": "/b", "value": 2}]))["version"] == 2
            # A text past the attachment's threshold goes framed, as over the pipes (protocol/README.md §2).
            opened = await s.open_stream(framing="sse")
            text = "data: " + '{"type":"RUN_STARTED","threadId":"x","runId":"y"}' + " " * (100 << 10) + "\n\n"
            assert (await s.fix_stream(opened["streamId"], text))["text"] == text
            await s.close_stream(opened["streamId"])
        assert sync.get_state("t1") == {"version": 2, "state": {"a": 1, "b": 2}}
    with AguiState(sidecar=address, timeout=30) as again:
        assert again.get_state("t1")["version"] == 2, "closing a connection leaves the sidecar and its threads"
    assert serve.proc.poll() is None


async def test_loopback_tcp(sock: str) -> None:
    serve = Serve("tcp:127.0.0.1:0")
    async with AsyncAguiState(sidecar=serve.address, timeout=30) as s:
        await s.open_run("t", state={"a": 1})
        with pytest.raises(RuntimeError, match="not known"):
            s.pid  # nothing on a TCP connection says whose it is
    with AguiState(sidecar=serve.address, timeout=30) as sync:
        assert sync.get_state("t")["state"] == {"a": 1}


async def test_a_broken_connection_fails_calls_as_a_dead_sidecar_and_restart_connects_again(sock: str) -> None:
    address = f"unix:{sock}"
    serve = Serve(f"unix:{sock}")
    sync = AguiState(sidecar=address, timeout=30)
    s = await AsyncAguiState(sidecar=address, timeout=30).start()
    sync.open_run("t", state={})
    serve.kill()
    with pytest.raises(SidecarExitedError, match=f"the connection to the agui-state sidecar at {address} closed"):
        sync.stats()
    with pytest.raises(SidecarExitedError, match=f"the connection to the agui-state sidecar at {address} closed"):
        await s.stats()
    # Nobody answers: without start mode, reaching it fails at once, and the client waits for nobody.
    with pytest.raises(SidecarUnreachableError, match=f"no agui-state sidecar at {address}: nobody answers there"):
        sync.restart()
    with pytest.raises(SidecarUnreachableError):
        await s.restart()
    serve = Serve(f"unix:{sock}")  # a process manager's restart
    sync.restart()
    await s.restart()
    assert sync.pid == s.pid == serve.pid
    assert (await s.open_run("t", state={"x": 1}))["version"] == 1, "a new sidecar: the thread is opened anew"
    sync.close()
    await s.close()


def test_start_mode_starts_one_detached_sidecar_that_outlives_the_client_and_exits_when_idle(sock: str) -> None:
    address = f"unix:{sock}"
    with AguiState(BIN, args=["--exit-idle", "300"], env=child_env(), sidecar=address, sidecar_start=True,
                   timeout=30) as s:
        pid = s.pid
        assert serving(sock) == [pid]
        assert cmdline(pid) == [BIN, "serve", "--listen", address, "--exit-idle", "60000", "--exit-idle", "300"]
        assert os.getsid(pid) == pid, "a session of its own: the worker's signals do not reach it"
        for fd in (0, 1, 2):
            assert os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null"
        with AguiState(BIN, sidecar=address, sidecar_start=True, timeout=30) as other:
            assert other.pid == pid, "found serving: not started again"
    # No connection left: it stops on its own after --exit-idle (the client's args went last, and hold).
    until(lambda: not serving(sock), "the started sidecar to exit once idle")
    assert not os.path.exists(sock)


def _refused(sock: str) -> str:
    return ("the sidecar started there refused its command line (exit 2): "
            f"{BIN} serve --listen unix:{sock} --exit-idle 60000 --max-ops 0")


def test_a_start_whose_command_line_is_refused_fails_at_once_showing_it(sock: str) -> None:
    # Exit 2 is a refusal of the flags (src/cli/exit.ts): every start would meet it, so the client starts no
    # other and gives up at once (fails open), naming the command, which the user can run to read why.
    with pytest.raises(SidecarUnreachableError) as e:
        AguiState(BIN, args=["--max-ops", "0"], env=child_env(), sidecar=f"unix:{sock}", sidecar_start=True)
    assert e.value.reason == _refused(sock)
    assert serving(sock) == []


async def test_an_async_start_whose_command_line_is_refused_fails_at_once_showing_it(sock: str) -> None:
    client = AsyncAguiState(BIN, args=["--max-ops", "0"], env=child_env(), sidecar=f"unix:{sock}", sidecar_start=True)
    with pytest.raises(SidecarUnreachableError) as e:
        await client.start()
    assert e.value.reason == _refused(sock)
    assert serving(sock) == []


STARTER = """
import os, sys, time
sys.path.insert(0, sys.argv[3])
from agui_state import AguiState
while not os.path.exists(sys.argv[2]):
    time.sleep(0.001)
with AguiState(sys.argv[4], sidecar=sys.argv[1], sidecar_start=True, timeout=30) as s:
    s.open_run("t" + str(os.getpid()), state={})
    print(s.pid, s.stats()["threads"], flush=True)
    sys.stdin.read()
"""


def test_workers_starting_at_once_converge_on_one_sidecar(sock: str) -> None:
    go = sock + ".go"
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    workers = [subprocess.Popen([sys.executable, "-c", STARTER, f"unix:{sock}", go, source, BIN],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env()) for _ in range(6)]
    try:
        open(go, "w").close()
        said: List[Dict[str, Any]] = []
        for w in workers:
            assert w.stdout is not None
            pid, threads = w.stdout.readline().split()
            said.append({"pid": int(pid), "threads": int(threads)})
        pids = {s["pid"] for s in said}
        assert len(pids) == 1, f"every worker reached the same sidecar: {said}"
        # The starts that lost the race exit 3 on their own; the one that serves is left.
        until(lambda: serving(sock) == list(pids), "the losing starts to exit")
    finally:
        for w in workers:
            w.kill()
            w.communicate(timeout=WAIT)
