"""How both clients carry a call (issue 26): AguiState's calling thread reads its own reply, with no reader
thread; many threads share one sidecar, each reply reaching its own caller; a reply read by one caller for
another is kept for it; a sidecar that dies fails every waiting call at once with SidecarExitedError, not
with a timeout; timeouts still hold; a full pipe in both directions does not deadlock. AsyncAguiState
runs no task of its own: its replies are set on the callers' futures from the loop's data callback."""
from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from typing import Any, List

import pytest
from helpers import BIN, HOLD, PY, REVERSE, WIRE, child_env

from agui_state import AguiState, AsyncAguiState, SidecarExitedError

# Reads one request ("late") and then the first byte of the next; only then answers the first with 1 MiB,
# and blocks writing it (nobody reads) while the client is still writing the next request, of 1 MiB too.
# Then it reads the rest of that request and answers it with its size. A client whose writer does not read
# stdout while stdin is full waits on the stand-in forever, and the stand-in on it.
LATE_AND_FULL = WIRE + ("r = read()\n"
                        "first = inp.read(1)\n"
                        "write(reply(r, {'pad': 'x' * (1 << 20)}))\n"
                        "r = read(first)\n"
                        "write(reply(r, {'n': len(r['params']['pad'])}))\n"
                        "inp.read()\n")


def until(cond: Any, what: str) -> None:
    """Waits for a state of the client that the test needs before its next step (not a pass condition)."""
    deadline = time.monotonic() + 20
    while not cond():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.001)


def test_no_reader_thread_on_the_reply_path() -> None:
    # Threads are compared as objects, not names: an earlier test's stderr drain may still be finishing,
    # and a name already present would hide this client's own drain.
    before = set(threading.enumerate())

    def started() -> List[str]:
        return sorted(t.name for t in set(threading.enumerate()) - before)

    with AguiState(BIN, env=child_env(), timeout=30) as s:
        assert s.stats()["threads"] == 0
        assert started() == [], f"AguiState started threads {started()}: the caller reads its own reply"
    with AguiState(BIN, env=child_env(), capture_logs=True) as s:
        assert s.stats()["threads"] == 0
        assert started() == ["agui-state-stderr"], "only the stderr drain"


def test_many_threads_each_get_their_own_replies() -> None:
    n, calls = 32, 40
    start = threading.Barrier(n)
    with AguiState(BIN, env=child_env(), timeout=30) as s:
        def one(i: int) -> List[Any]:
            start.wait()
            tid = f"many-{i}"
            got = [s.open_run(tid, state={"who": i})["threadId"]]
            for k in range(calls):
                # Every reply names what only its own request asked for, so a reply given to the wrong
                # caller shows: the pointer of this thread's segments, and this thread's state.
                got.append(s.escape_pointer([f"t{i}/k{k}", k])["pointer"])
                got.append(s.diff_state(tid, k, path="/k")["version"])
            got.append(s.get_state(tid)["state"])
            return got

        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(one, range(n)))
        session = s._session
        assert session.kept == {} and session.waiting == set() and not session.reading
    for i, got in enumerate(results):
        expected: List[Any] = [f"many-{i}"]
        for k in range(calls):
            expected += [f"/t{i}~1k{k}/{k}", k + 2]
        expected.append({"who": i, "k": calls - 1})
        assert got == expected


def test_a_reply_read_for_another_caller_is_kept_for_it() -> None:
    # REVERSE answers two requests last first: the reader (the first caller) reads the second caller's
    # reply before its own, and must keep it for that caller.
    with AguiState(PY, ["-c", REVERSE, "2"], timeout=30) as f, ThreadPoolExecutor(1) as pool:
        first = pool.submit(f.call, "echo", {"who": "first"})
        until(lambda: f._session.reading, "the first caller reads stdout")
        assert f.call("echo", {"who": "second"}) == {"who": "second"}
        assert first.result() == {"who": "first"}
        assert f._session.kept == {} and f._session.waiting == set()


def test_big_replies_split_across_reads_reach_each_thread() -> None:
    big = {f"k{i}": "v" * 1000 for i in range(1000)}  # about 1 MB: many reads of the pipe per reply
    with AguiState(BIN, env=child_env(), timeout=60) as s:
        s.open_run("big", state=big)
        with ThreadPoolExecutor(6) as pool:
            got = list(pool.map(lambda i: s.get_state("big", None if i % 2 else "/k7"), range(24)))
    assert all(g["state"] == (big if i % 2 else "v" * 1000) for i, g in enumerate(got))


def test_kill_9_fails_every_waiting_call_at_once() -> None:
    # Three callers wait on replies held back; the sidecar is killed. Each call ends with the exit status,
    # as soon as stdout ends: with a timeout of 600 s, a call that waited for its timeout would not end.
    with AguiState(PY, ["-c", HOLD], timeout=600) as f, ThreadPoolExecutor(3) as pool:
        calls = [pool.submit(f.call, "echo", {"n": i}) for i in range(3)]
        f.call("sync")  # the three requests are with the stand-in
        until(lambda: f._session.reading and f._session.sleepers == 2, "one caller reads, two wait")
        os.kill(f.pid, signal.SIGKILL)
        for c in calls:
            with pytest.raises(SidecarExitedError) as e:
                c.result()
            assert e.value.returncode == -9 and "SIGKILL" in str(e.value)
        with pytest.raises(SidecarExitedError, match="SIGKILL"):
            f.stats()


def test_kill_9_under_load_gives_every_thread_the_exit_status() -> None:
    errors: List[BaseException] = []
    with AguiState(BIN, env=child_env(), timeout=600) as s:
        s.open_run("load", state={})
        go = threading.Barrier(9)

        def hammer(i: int) -> None:
            go.wait()
            try:
                for k in range(10 ** 9):
                    s.diff_state("load", k, path=f"/t{i}")
            except BaseException as e:  # noqa: B036: whatever ends the loop is what the test looks at
                errors.append(e)

        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        go.wait()
        until(lambda: s.get_state("load")["version"] > 200, "the threads are calling")
        os.kill(s.pid, signal.SIGKILL)
        for t in threads:
            t.join()
    assert len(errors) == 8
    assert all(isinstance(e, SidecarExitedError) and e.returncode == -9 for e in errors), errors


def test_timeouts_of_the_reader_and_of_a_waiting_caller() -> None:
    with AguiState(PY, ["-c", HOLD], timeout=30) as f, ThreadPoolExecutor(1) as pool:
        # The reader's timeout is well past the other's, so that the other times out while the first still
        # reads (on the condition), and a test thread slow to see `reading` on a loaded machine still sees it
        # (with 0.5 s, a stall that long let the reader time out first and `until` wait in vain).
        reader = pool.submit(f.call, "echo", {"n": 1}, timeout=3)
        until(lambda: f._session.reading, "the first caller reads stdout")
        with pytest.raises(futures.TimeoutError):
            f.call("echo", {"n": 2}, timeout=0.3)  # waits on the condition, not on the pipe
        with pytest.raises(futures.TimeoutError):
            reader.result()  # waits in poll() on the pipe
        assert f.call("release") == {}, "the late replies went nowhere"
        assert f.call("sync", {"n": 3}) == {"n": 3}
        assert f._session.kept == {} and f._session.waiting == set()


def test_a_request_larger_than_the_pipe_while_another_caller_reads() -> None:
    # The first caller reads stdout, waiting for a held reply. The second writes 1 MiB, far more than the
    # pipe holds, so its write waits on stdin without being the reader; its reply, read by the first
    # caller, is kept for it.
    with AguiState(PY, ["-c", HOLD], timeout=30) as f, ThreadPoolExecutor(1) as pool:
        reader = pool.submit(f.call, "echo", {"n": 1})
        until(lambda: f._session.reading, "the first caller reads stdout")
        assert f.call("sync", {"pad": "y" * (1 << 20)}) == {"pad": "y" * (1 << 20)}
        assert reader.running(), "the first caller still waits for its held reply"
        assert f.call("release") == {}
        assert reader.result() == {"n": 1}
        assert f._session.kept == {} and f._session.waiting == set() and not f._session.reading


def test_a_late_reply_and_a_full_stdin_do_not_deadlock() -> None:
    with AguiState(PY, ["-c", LATE_AND_FULL], timeout=30) as f:
        with pytest.raises(futures.TimeoutError):
            f.call("late", timeout=0.3)
        assert f.call("next", {"pad": "y" * (1 << 20)}) == {"n": 1 << 20}


async def test_the_asyncio_client_runs_no_task_of_its_own() -> None:
    async with AsyncAguiState(PY, ["-c", HOLD], timeout=30) as f:
        call = asyncio.ensure_future(f.call("echo", {"n": 1}))
        assert await f.call("sync") == {}
        assert asyncio.all_tasks() == {asyncio.current_task(), call}, "no reader task: replies come from the loop"
        assert await f.call("release") == {}
        assert await call == {"n": 1}


async def test_the_asyncio_client_under_a_full_pipe_both_ways() -> None:
    async with AsyncAguiState(PY, ["-c", LATE_AND_FULL], timeout=30) as f:
        with pytest.raises(asyncio.TimeoutError):
            await f.call("late", timeout=0.3)
        assert await f.call("next", {"pad": "y" * (1 << 20)}) == {"n": 1 << 20}
        assert f._live().pending == {}
